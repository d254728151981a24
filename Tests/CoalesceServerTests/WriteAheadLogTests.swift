@testable import CoalesceStore
import CoalesceTestSupport
import Foundation
import GRDB
import Testing

/// The reading of SQLite's write-ahead log before the store opens it, on logs real SQLite wrote: what a crash leaves
/// (a whole log, a torn last frame) is accepted, damage that SQLite would silently drop commits behind is found.
@Suite struct WriteAheadLogTests {
    static let pageSize = 4096
    static var frameSize: Int { WriteAheadLog.frameHeaderSize + Self.pageSize }

    /// A log of `commits` transactions of one row each, as a crash of the writer would leave it (copied while the
    /// connection is open: closing it would copy the log into the database and delete it).
    func log(commits: Int) throws -> (directory: TemporaryDirectory, bytes: [UInt8]) {
        let directory = try TemporaryDirectory()
        let database = try DatabaseQueue(path: directory.file("test.db"))
        try database.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            try db.execute(sql: "CREATE TABLE post (id INTEGER PRIMARY KEY, payload TEXT)")
        }
        for index in 0..<commits {
            try database.write { db in
                try db.execute(sql: "INSERT INTO post (payload) VALUES (?)", arguments: [String(repeating: "p\(index)", count: 300)])
            }
        }
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory.file("test.db-wal"))))
        return (directory, bytes)
    }

    /// What the check says of `bytes` as a log.
    func check(_ bytes: [UInt8], in directory: TemporaryDirectory) throws -> String? {
        let path = directory.file("copy.db-wal")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return try WriteAheadLog.droppedCommits(path: path)
    }

    /// The indexes of the commit frames (those that give the database's size after the commit).
    func commitFrames(_ bytes: [UInt8]) -> [Int] {
        let frames = (bytes.count - WriteAheadLog.headerSize) / Self.frameSize
        return (0..<frames).filter { WriteAheadLog.bigEndian(bytes, WriteAheadLog.headerSize + $0 * Self.frameSize + 4) != 0 }
    }

    func overwrite(_ bytes: inout [UInt8], frame: Int, at offset: Int = 100) {
        var random = SystemRandomNumberGenerator()
        let start = WriteAheadLog.headerSize + frame * Self.frameSize + offset
        for index in start..<start + 512 { bytes[index] = UInt8.random(in: 0...255, using: &random) }
    }

    @Test func aLogAsACrashLeavesItIsAccepted() throws {
        let (directory, bytes) = try self.log(commits: 40)
        #expect(self.commitFrames(bytes).count >= 40)
        #expect(try self.check(bytes, in: directory) == nil)
        // The last frame torn: a write that was never synced, so never answered.
        #expect(try self.check(Array(bytes.dropLast(1000)), in: directory) == nil)
        var torn = bytes
        self.overwrite(&torn, frame: self.commitFrames(bytes).last!)
        #expect(try self.check(torn, in: directory) == nil)
        #expect(try self.check([], in: directory) == nil, "an empty log, as a clean stop leaves it")
    }

    @Test func damageBeforeLaterCommitsIsFound() throws {
        let (directory, bytes) = try self.log(commits: 40)
        let commits = self.commitFrames(bytes)
        var damaged = bytes
        let frame = commits[commits.count / 2]
        self.overwrite(&damaged, frame: frame)
        let found = try #require(try self.check(damaged, in: directory))
        #expect(found.hasPrefix("frame \(frame + 1) of "), "\(found)")
    }

    @Test func aDamagedHeaderIsFound() throws {
        let (directory, bytes) = try self.log(commits: 5)
        var damaged = bytes
        damaged[17] ^= 0xFF  // a salt: the header's checksum fails, and SQLite would ignore the log
        #expect(try self.check(damaged, in: directory)?.hasPrefix("its header is not whole") == true)
    }

    /// Damage in the last transaction's frames cannot be told from a torn write of a transaction never synced: the
    /// operator's guide says so.
    @Test func damageInTheLastTransactionIsNotTold() throws {
        let (directory, bytes) = try self.log(commits: 10)
        let commits = self.commitFrames(bytes)
        var damaged = bytes
        self.overwrite(&damaged, frame: commits[commits.count - 2] + 1)
        #expect(try self.check(damaged, in: directory) == nil)
    }
}
