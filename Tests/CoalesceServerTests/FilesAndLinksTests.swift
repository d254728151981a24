import CoalesceTestSupport
import Foundation
import Testing

@testable import CoalesceServer
@testable import Systemd

/// The file-system calls the daemon and its store make through Systemd: directories made with their parents, names
/// moved, links followed, a small file replaced durably, the store's lock.
@Suite struct FilesAndLinksTests {
    private func permissions(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
    }

    @Test func directoriesAreMadeAfterAnExistingPrefixAndTheLastGetsItsMode() throws {
        let directory = try TemporaryDirectory()
        let existing = try directory.directory("existing", mode: 0o711)
        let path = existing + "/made/state"
        try makeDirectories(path, permissions: 0o700)
        #expect(try self.permissions(path) == 0o700)
        #expect(try self.permissions(existing + "/made") == 0o755)
        // What was there keeps its mode, the directory asked for included.
        #expect(try self.permissions(existing) == 0o711)
        try makeDirectories(existing, permissions: 0o700)
        #expect(try self.permissions(existing) == 0o711)
    }

    @Test func aDirectoryThatCannotBeMadeNamesTheFirstPathThatFailed() throws {
        let directory = try TemporaryDirectory()
        try directory.write("file", "not a directory")
        let blocked = directory.file("file/below")
        #expect(throws: FileError(operation: "mkdir", path: blocked, errno: ENOTDIR)) {
            try makeDirectories(blocked + "/state", permissions: 0o700)
        }
        // The daemon's start-up logs that reason as it is.
        #expect(createDirectory(blocked + "/state", mode: 0o700) == "\(blocked): Not a directory")
    }

    @Test func aRenameMovesTheNameAndAFailedOneNamesTheFile() throws {
        let directory = try TemporaryDirectory()
        try directory.write("apps.json", "{\"apps\": []}")
        let registry = AppRegistryFile(stateDirectory: directory.path)
        #expect(registry.exists)
        try registry.markImported()
        #expect(!registry.exists)
        #expect(DirectoryEntry.exists(directory.file("apps.json.imported")))
        do {
            try registry.markImported()
            Issue.record("renaming a file that is not there succeeded")
        } catch {
            #expect(error.description == "cannot rename \(registry.path): No such file or directory")
        }
    }

    @Test func aLinkGivesItsTargetAsWrittenAndResolvesThroughEveryLink() throws {
        let directory = try TemporaryDirectory()
        try directory.write("zones/Europe/Berlin", "TZif")
        try FileManager.default.createSymbolicLink(atPath: directory.file("share"), withDestinationPath: "zones")
        let link = directory.file("localtime")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "share/Europe/Berlin")
        #expect(try SymbolicLink.target(of: link) == Array("share/Europe/Berlin".utf8))
        let resolvedDirectory = try SymbolicLink.resolved(directory.path)
        #expect(try SymbolicLink.resolved(link) == resolvedDirectory + "/zones/Europe/Berlin")
        #expect(try FileStatus(at: link, followingLinks: false).kind == .symbolicLink)
        let followed = try FileStatus(at: link)
        #expect(followed.kind == .regular && followed.size == 4)
        #expect(throws: SystemdError(operation: "readlink(\(directory.file("share/Europe/Berlin")))", errno: EINVAL)) {
            _ = try SymbolicLink.target(of: directory.file("share/Europe/Berlin"))
        }
        let dangling = directory.file("dangling")
        try FileManager.default.createSymbolicLink(atPath: dangling, withDestinationPath: "nowhere")
        #expect(throws: SystemdError(operation: "realpath(\(dangling))", errno: ENOENT)) {
            _ = try SymbolicLink.resolved(dangling)
        }
        #expect(throws: SystemdError(operation: "stat(\(dangling))", errno: ENOENT)) {
            _ = try FileStatus(at: dangling)
        }
    }

    @Test func aReplacedFileHoldsTheNewContentsAndLeavesNothingBeside() throws {
        let directory = try TemporaryDirectory()
        try directory.write("record", "open\n")
        try ReplacedFile.replace("record", in: directory.path, with: Array("closed\n".utf8))
        #expect(try String(contentsOfFile: directory.file("record"), encoding: .utf8) == "closed\n")
        #expect(!DirectoryEntry.exists(directory.file("record.new")))
        #expect(try self.permissions(directory.file("record")) == 0o600)
        let missing = directory.file("missing")
        #expect(throws: FileError(operation: "open", path: missing + "/record.new", errno: ENOENT)) {
            try ReplacedFile.replace("record", in: missing, with: [])
        }
    }

    @Test func aSecondLockOnTheFileIsRefusedNamingTheHolder() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("coalesced.lock")
        let held = try LockFile(path: path)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "\(getpid())\n")
        #expect(throws: LockFile.Failure.held(pid: getpid())) { _ = try LockFile(path: path) }
        #expect(throws: LockFile.Failure.failed(errno: ENOENT)) { _ = try LockFile(path: directory.file("no/lock")) }
        #expect(LockFile.Failure.failed(errno: ENOENT).reason == "No such file or directory")
        _ = held
    }

    @Test func aPositionedReadStopsAtTheEndOfTheFile() throws {
        let directory = try TemporaryDirectory()
        try directory.write("log", "0123456789")
        let file = try ReadableFile(directory.file("log"))
        #expect(try file.size() == 10)
        #expect(try file.read(4, at: 2) == Array("2345".utf8))
        #expect(try file.read(4, at: 8) == Array("89".utf8))
        #expect(try file.read(4, at: 20) == [])
    }
}
