import Systemd

/// A reading of SQLite's write-ahead log (`coalesced.db-wal`) before SQLite opens it, to find commits SQLite would
/// drop without a word (https://www.sqlite.org/fileformat2.html#walformat).
///
/// SQLite recovers a log by reading its frames in order and stops at the first frame whose salts differ from the
/// header's or whose cumulative checksum fails; what comes after is taken as never committed. That is right for
/// what a crash leaves behind (frames of a transaction that was never synced, or frames left from before the log
/// was last restarted, which carry older salts), and wrong for damage: a page overwritten in the middle of the log
/// silently drops every commit after it.
///
/// The two are told apart by what the store's `synchronous=FULL` promises: a commit returns only once the log is
/// synced up to its commit frame, and the next transaction writes its frames only after that. So a commit frame
/// with the header's salts, followed by a frame with the header's salts whose checksum continues from that commit
/// frame's, was synced: every frame before it was whole on disk. A bad frame before such a commit is damage. Only
/// the last transaction before a crash can hold a bad frame legitimately (a torn, unsynced write), and with no
/// transaction after it, damage there cannot be told from a torn write; it is not reported.
enum WriteAheadLog {
    /// Bytes of the log's header and of each frame's header.
    static let headerSize = 32
    static let frameHeaderSize = 24

    /// What in the log at `path` SQLite would drop though it was committed, as a phrase; `nil` when nothing (or when
    /// there is no log).
    /// - Throws: ``StoreError/cannotRead(path:reason:)`` when the log exists and cannot be read.
    static func droppedCommits(path: String) throws(StoreError) -> String? {
        let file: ReadableFile
        do throws(SystemdError) {
            file = try ReadableFile(path)
        } catch {
            if error.errno == Errno.ENOENT { return nil }
            throw .cannotRead(path: path, reason: error.reason)
        }
        let size: Int
        do throws(SystemdError) {
            size = try file.size()
        } catch {
            throw .cannotRead(path: path, reason: error.reason)
        }
        // Too short for one frame of the smallest page: nothing to drop.
        guard size >= Self.headerSize + Self.frameHeaderSize + 512 else { return nil }
        let header = try Self.read(file, count: Self.headerSize, at: 0, path: path)
        let magic = Self.bigEndian(header, 0)
        let pageSize = Int(Self.bigEndian(header, 8))
        let isLog =
            magic & 0xFFFF_FFFE == 0x377F_0682 && pageSize >= 512 && pageSize <= 65536 && pageSize & (pageSize - 1) == 0
        let bigEndianSums = magic & 1 == 1
        let headerSum = isLog ? Self.checksum(header[0..<24], bigEndian: bigEndianSums, seed: (0, 0)) : (0, 0)
        guard isLog, headerSum == (Self.bigEndian(header, 24), Self.bigEndian(header, 28)) else {
            // SQLite ignores the whole log then. A header is one 32-byte write, synced before the first frame goes
            // after it: it is not torn by a crash.
            return "its header is not whole, and SQLite would ignore all \(size) bytes of it"
        }
        let salts = (Self.bigEndian(header, 16), Self.bigEndian(header, 20))
        let frameSize = Self.frameHeaderSize + pageSize
        let frames = (size - Self.headerSize) / frameSize

        // The frames SQLite reads: up to the first whose salts or checksum fail.
        var running = headerSum
        var firstBad: Int?
        var previousStored = headerSum
        var evidence: (commits: Int, lastSyncedCommit: Int)?
        var previousWasCommit = false
        for index in 0..<frames {
            let frame = try Self.read(file, count: frameSize, at: Self.headerSize + index * frameSize, path: path)
            let stored = (Self.bigEndian(frame, 16), Self.bigEndian(frame, 20))
            let saltsMatch = (Self.bigEndian(frame, 8), Self.bigEndian(frame, 12)) == salts
            let isCommit = Self.bigEndian(frame, 4) != 0
            if firstBad == nil {
                running = Self.checksum(frame[0..<8], bigEndian: bigEndianSums, seed: running)
                running = Self.checksum(frame[Self.frameHeaderSize...], bigEndian: bigEndianSums, seed: running)
                if !saltsMatch || running != stored || Self.bigEndian(frame, 0) == 0 { firstBad = index }
            }
            if let bad = firstBad, index > bad {
                // From the bad frame on: does a transaction follow a commit (its first frame continuing the
                // commit frame's checksum)? Then that commit was synced, and the bad frame before it is damage.
                var local = Self.checksum(frame[0..<8], bigEndian: bigEndianSums, seed: previousStored)
                local = Self.checksum(frame[Self.frameHeaderSize...], bigEndian: bigEndianSums, seed: local)
                if previousWasCommit, saltsMatch, local == stored {
                    evidence = (commits: (evidence?.commits ?? 0) + 1, lastSyncedCommit: index - 1)
                }
            }
            previousStored = stored
            previousWasCommit = saltsMatch && isCommit
        }
        guard let bad = firstBad, let evidence else { return nil }
        return "frame \(bad + 1) of \(frames) fails its checksum, and at least \(evidence.commits) commits synced after "
            + "it, up to frame \(evidence.lastSyncedCommit + 1), would be dropped"
    }

    /// SQLite's WAL checksum: over 32-bit words in pairs, in the byte order the log's magic number names.
    static func checksum(_ bytes: ArraySlice<UInt8>, bigEndian: Bool, seed: (UInt32, UInt32)) -> (UInt32, UInt32) {
        var (first, second) = seed
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset + 8 <= raw.count {
                let a = raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)
                let b = raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                first = first &+ (bigEndian ? UInt32(bigEndian: a) : UInt32(littleEndian: a)) &+ second
                second = second &+ (bigEndian ? UInt32(bigEndian: b) : UInt32(littleEndian: b)) &+ first
                offset += 8
            }
        }
        return (first, second)
    }

    /// The big-endian 32-bit integer at `offset`: every field of the log's headers is stored so.
    static func bigEndian(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    private static func read(
        _ file: borrowing ReadableFile, count: Int, at offset: Int, path: String
    ) throws(StoreError) -> [UInt8] {
        let bytes: [UInt8]
        do throws(SystemdError) {
            bytes = try file.read(count, at: offset)
        } catch {
            throw .cannotRead(path: path, reason: error.reason)
        }
        guard bytes.count == count else { throw .cannotRead(path: path, reason: "it ended early") }
        return bytes
    }
}
