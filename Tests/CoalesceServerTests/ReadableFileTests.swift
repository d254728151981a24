import CoalesceTestSupport
import Foundation
import Testing

@testable import Systemd

/// The bounded file read and the directory listing the daemon reads its configuration, zones and pressure with.
@Suite struct ReadableFileTests {
    private func file(_ bytes: Int, in directory: TemporaryDirectory) throws -> String {
        let path = directory.path + "/file"
        try Data(repeating: UInt8(ascii: "x"), count: bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func aFileUpToItsBoundIsReadWhole() throws {
        let directory = try TemporaryDirectory()
        // Larger than one read's chunk, so that the bound is checked across reads.
        let path = try self.file(40_000, in: directory)
        #expect(try ReadableFile.contents(of: path, limit: 40_000).count == 40_000)
        #expect(try ReadableFile.contents(of: try self.file(0, in: directory), limit: 0) == [])
    }

    @Test func aFilePastItsBoundIsRefusedWithEFBIG() throws {
        let directory = try TemporaryDirectory()
        let path = try self.file(40_001, in: directory)
        #expect(throws: SystemdError(operation: "read(\(path))", errno: EFBIG)) {
            _ = try ReadableFile.contents(of: path, limit: 40_000)
        }
        #expect(throws: SystemdError(operation: "read(\(path))", errno: EFBIG)) {
            _ = try ReadableFile.contents(of: path, limit: 0)
        }
    }

    @Test func aPrefixStopsAtItsLengthOrTheEnd() throws {
        let directory = try TemporaryDirectory()
        let path = try self.file(1000, in: directory)
        #expect(try ReadableFile(path).readPrefix(512).count == 512)
        #expect(try ReadableFile(path).readPrefix(4096).count == 1000)
    }

    @Test func aMissingFileNamesOpenAndTheErrno() {
        #expect(throws: SystemdError(operation: "open(/nonexistent/file)", errno: ENOENT)) {
            _ = try ReadableFile.contents(of: "/nonexistent/file", limit: 10)
        }
    }

    @Test func theKindTellsARegularFileFromADirectoryAndAFIFO() throws {
        let directory = try TemporaryDirectory()
        #expect(try ReadableFile(try self.file(1, in: directory)).kind() == .regular)
        #expect(try ReadableFile(directory.path).kind() == .directory)
        let fifo = directory.path + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        // Opened without blocking: with no writer, a blocking open would wait for good.
        #expect(try ReadableFile(fifo, nonBlocking: true).kind() == .other)
        #expect(throws: SystemdError(operation: "read(\(directory.path))", errno: EISDIR)) {
            _ = try ReadableFile.contents(of: directory.path, limit: 10)
        }
    }

    @Test func aListingLeavesOutDotAndDotDot() throws {
        let directory = try TemporaryDirectory()
        #expect(try DirectoryListing.names(in: directory.path).isEmpty)
        _ = try self.file(1, in: directory)
        #expect(mkdir(directory.path + "/sub", 0o700) == 0)
        let names = try DirectoryListing.names(in: directory.path).map { String(decoding: $0, as: UTF8.self) }
        #expect(names.sorted() == ["file", "sub"])
        #expect(throws: SystemdError(operation: "opendir(/nonexistent)", errno: ENOENT)) {
            _ = try DirectoryListing.names(in: "/nonexistent")
        }
    }
}
