public import CoalesceCore
import Foundation
import GRDB
import Systemd
import Synchronization

/// One write handed to the store: data to write, and whom to tell how it went. It touches nothing but the store.
///
/// The store runs ``perform(_:)`` on its writer thread, inside a transaction with the writes submitted around it,
/// in the order they were submitted; ``finish(_:)`` is called once that transaction is on disk or has failed, again
/// in submission order. A write that failed (its own statements, or the transaction it went into) left nothing on
/// disk; its owner drops the change it was waiting to apply.
public protocol StoreOperation: AnyObject, Sendable {
    /// The store has taken the write into the batch it is about to carry out, before it asks anything else of
    /// it: what the write holds is final from here on.
    func begin()
    /// Runs the write's statements in `transaction`.
    /// - Throws: whatever makes the write fail.
    func perform(_ transaction: StoreTransaction) throws
    /// The write is on disk (`nil`) or failed (the error ``perform(_:)`` threw, or a ``StoreError``).
    func finish(_ failure: (any Error)?)
    /// Whether ``perform(_:)`` runs at most one statement: SQLite undoes a failed statement by itself, so such a
    /// write needs no savepoint of its own (two statements fewer for each post).
    var runsOneStatement: Bool { get }
    /// For a write whose only statement sets one row to a value (an app's recorded state): that row. Of the
    /// writes of one row in a batch, the store runs the statement once, through the last of them (``writeRow(_:)``;
    /// their ``perform(_:)`` runs nothing), at the end of the batch or before the next write that is not of this
    /// sort, whichever comes first. If that statement fails, every write of the row since it was last written
    /// fails. So an app's states in one batch cost one row write.
    var row: StoreRow? { get }
    /// Writes ``row``; called on the last write of the row in a run of such writes.
    func writeRow(_ transaction: StoreTransaction) throws
}

extension StoreOperation {
    public func begin() {}
    public var runsOneStatement: Bool { false }
    public var row: StoreRow? { nil }
    public func writeRow(_ transaction: StoreTransaction) throws {}
}

/// A row that writes in a batch may set again and again (see ``StoreOperation/row``).
public struct StoreRow: Hashable, Sendable {
    public var app: AppName
    /// The held kind; empty for the app's own row.
    public var kind: String
    private var isAppRow = false

    /// A row of an app's for one kind.
    public init(app: AppName, kind: String) {
        self.app = app
        self.kind = kind
    }

    /// The app's own row (its recorded state), which no kind's row can be taken for.
    public static func app(_ app: AppName) -> StoreRow {
        var row = StoreRow(app: app, kind: "")
        row.isAppRow = true
        return row
    }
}

/// The statements one operation may run, inside the store's transaction.
public struct StoreTransaction {
    let db: Database
    let path: String

    /// Runs one statement, compiled once per connection: the same few statements run for every post.
    func run(_ sql: String, _ arguments: StatementArguments = StatementArguments()) throws(StoreError) {
        do {
            try self.db.cachedStatement(sql: sql).execute(arguments: arguments)
        } catch {
            throw StoreError(writing: self.path, error)
        }
    }

    /// Runs `body` in a savepoint: what it wrote is kept when it returns, and taken back when it throws.
    func savepoint(_ body: () throws -> Void) throws {
        try self.run("SAVEPOINT operation")
        do {
            try body()
        } catch {
            // Unless SQLite already rolled the whole transaction back.
            if self.db.isInsideTransaction { try self.run("ROLLBACK TO operation") }
            if self.db.isInsideTransaction { try self.run("RELEASE operation") }
            throw error
        }
        try self.run("RELEASE operation")
    }
}

/// One write handed to the store: `wait()` returns once the transaction it went into is on disk.
public final class StoreCommit: Sendable {
    private struct State {
        var outcome: Result<Void, StoreError>?
        var waiter: CheckedContinuation<Result<Void, StoreError>, Never>?
        var callback: (@Sendable (Result<Void, StoreError>) -> Void)?
    }

    private let state = Mutex(State())

    init() {}

    /// Waits for the commit.
    /// - Throws: ``StoreError`` when the write or its transaction failed; nothing of it is on disk then.
    public func wait() async throws(StoreError) {
        let outcome = await withCheckedContinuation { (waiter: CheckedContinuation<Result<Void, StoreError>, Never>) in
            let ready = self.state.withLock { state -> Result<Void, StoreError>? in
                if let outcome = state.outcome { return outcome }
                state.waiter = waiter
                return nil
            }
            if let ready { waiter.resume(returning: ready) }
        }
        try outcome.get()
    }

    /// Calls `body` with the commit's outcome once it is known (at once if it is), on the thread that learns it:
    /// for callers that answer without a task, as deferred Varlink methods do. One caller per commit.
    public func whenFinished(_ body: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        let ready = self.state.withLock { state -> Result<Void, StoreError>? in
            if let outcome = state.outcome { return outcome }
            state.callback = body
            return nil
        }
        if let ready { body(ready) }
    }

    func finish(_ outcome: Result<Void, StoreError>) {
        let (waiter, callback) = self.state.withLock { state in
            state.outcome = outcome
            defer {
                state.waiter = nil
                state.callback = nil
            }
            return (state.waiter, state.callback)
        }
        waiter?.resume(returning: outcome)
        callback?(outcome)
    }
}

/// A write made of statements only, answered through a ``StoreCommit``.
final class StatementWrite: StoreOperation {
    let path: String
    let body: @Sendable (StoreTransaction) throws -> Void
    let commit = StoreCommit()

    init(path: String, _ body: @escaping @Sendable (StoreTransaction) throws -> Void) {
        self.path = path
        self.body = body
    }

    func perform(_ transaction: StoreTransaction) throws { try self.body(transaction) }
    func finish(_ failure: (any Error)?) {
        guard let failure else { return self.commit.finish(.success(())) }
        // Its statements fail as a StoreError; the savepoint around them fails as SQLite's error, sorted here.
        self.commit.finish(.failure(StoreError(writing: self.path, failure)))
    }
}

/// Group commit: writes that arrive while a transaction is being flushed wait, and then all of them go to disk in
/// the next transaction, one fsync for the batch. Each caller is answered once its batch is durable, so
/// durability does not cost an fsync per write, and a write that was answered is on disk. Writes are applied in
/// the order they were submitted.
///
/// One thread writes; every write runs in a savepoint of its own, so one that fails is undone alone and the others
/// in its batch still commit, unless SQLite rolled the whole transaction back (a full disk can), in which case
/// every write of the batch is undone and fails.
///
/// A write nobody waits for (an acknowledgement, whose loss in a crash only means events come again) can be
/// *unhurried*: it does not start a transaction of its own, but goes with the next write that does, or after
/// ``unhurriedDelay`` at the latest. An app acknowledging each event as it comes would otherwise put a commit, and
/// its fsync, between every two posts to it. A caller with several writes that belong together (the posts of one
/// read) queues them unhurried and then calls ``hurry()``, so that they share a transaction.
final class GroupCommit: Sendable {
    private final class Queue: @unchecked Sendable {
        let condition = NSCondition()
        var pending: [any StoreOperation] = []
        /// Whether a write in `pending` wants its transaction now.
        var hurried = false
        /// When the oldest unhurried write in `pending` goes anyway.
        var unhurriedDeadline: Date?
        /// The store is closing: the writes queued are the last, and any other is refused.
        var closed = false
    }

    /// The writer thread's name (at most 15 bytes, the kernel's limit).
    static let threadName = "coalesced-store"

    /// The longest an unhurried write waits for company.
    static let unhurriedDelay: TimeInterval = 0.1
    private let delay: TimeInterval

    private let queue = Queue()
    private let path: String
    private let finishing: @Sendable (() -> Void) -> Void
    /// Whether the last transaction failed for a full disk (or, before the first, whether the start found it full).
    private let full: FullDisk

    /// Set by the writer thread, read by anyone.
    private final class FullDisk: Sendable {
        let found: Atomic<Bool>
        init(_ found: Bool) { self.found = Atomic(found) }
    }

    /// - Parameter owed: what the start could not write; each transaction writes it first, until one commits.
    init(
        writer: StoreWriter,
        owed: OwedWrites,
        unhurriedDelay: TimeInterval,
        finishing: @escaping @Sendable (() -> Void) -> Void
    ) {
        self.delay = unhurriedDelay
        self.path = writer.path
        self.finishing = finishing
        let full = FullDisk(!owed.isEmpty)
        self.full = full
        let queue = self.queue
        let thread = Thread {
            Systemd.nameThisThread(Self.threadName)
            while true {
                queue.condition.lock()
                while !queue.hurried {
                    if let deadline = queue.unhurriedDeadline {
                        if !queue.condition.wait(until: deadline) { break }  // its time is up
                    } else {
                        queue.condition.wait()
                    }
                }
                let batch = queue.pending
                queue.pending.removeAll(keepingCapacity: true)
                queue.hurried = false
                queue.unhurriedDeadline = nil
                queue.condition.unlock()
                if !batch.isEmpty { Self.commit(batch, writer: writer, owed: owed, full: full, finishing: finishing) }
            }
        }
        thread.name = Self.threadName
        thread.start()
    }

    /// Whether the last transaction failed because the file system holding the store is full (until the first
    /// transaction, whether the start found it full).
    var lastFoundDiskFull: Bool {
        self.full.found.load(ordering: .relaxed)
    }

    /// Starts a transaction for what is queued now, unhurried writes included (nothing if nothing is queued).
    func hurry() {
        let wake = self.queue.condition.withLock {
            guard !self.queue.pending.isEmpty, !self.queue.hurried else { return false }
            self.queue.hurried = true
            return true
        }
        // Signalled after the lock is let go, so that the writer does not wake only to wait for it.
        if wake { self.queue.condition.signal() }
    }

    /// Queues `operation` for the next transaction; it returns at once.
    /// - Parameter unhurried: whether it may wait (up to ``unhurriedDelay``) for a write that starts a transaction.
    func submit(_ operation: any StoreOperation, unhurried: Bool = false) {
        var refused = false
        let wake = self.queue.condition.withLock {
            guard !self.queue.closed else {
                refused = true
                return false
            }
            self.queue.pending.append(operation)
            if !unhurried {
                guard !self.queue.hurried else { return false }  // the writer is already woken
                self.queue.hurried = true
            } else if self.queue.unhurriedDeadline == nil {
                self.queue.unhurriedDeadline = Date(timeIntervalSinceNow: self.delay)
            } else {
                return false  // the writer already waits for an earlier deadline
            }
            return true
        }
        // As in hurry(): after the lock is let go.
        if wake { self.queue.condition.signal() }
        if refused {
            let failure = StoreError.cannotWrite(path: self.path, reason: "the daemon is stopping")
            self.finishing { operation.finish(failure) }
        }
    }

    /// Queues `last` as the last write and starts a transaction for what is queued; every write submitted after it
    /// is refused. Once `last` is finished, nothing more is written.
    func shutDown(after last: any StoreOperation) {
        self.queue.condition.withLock {
            self.queue.pending.append(last)
            self.queue.hurried = true
            self.queue.closed = true
        }
        self.queue.condition.signal()
    }

    private static func commit(
        _ batch: [any StoreOperation],
        writer: StoreWriter,
        owed: OwedWrites,
        full: FullDisk,
        finishing: (() -> Void) -> Void
    ) {
        var failures = [(any Error)?](repeating: nil, count: batch.count)
        // The batch is taken: what each write holds is final from here on.
        for operation in batch { operation.begin() }
        let path = writer.path
        do {
            let pool = try writer.get()
            try owed.writeRecord()
            let generation = try pool.write { db in
                let transaction = StoreTransaction(db: db, path: path)
                let generation = try owed.writeGeneration(transaction)
                // Rows set and not yet written, in the order first set, each with the writes that set it.
                var unwritten: [StoreRow: [Int]] = [:]
                var unwrittenOrder: [StoreRow] = []
                func writeRows() throws {
                    defer {
                        unwritten.removeAll(keepingCapacity: true)
                        unwrittenOrder.removeAll(keepingCapacity: true)
                    }
                    for row in unwrittenOrder {
                        let writes = unwritten[row]!  // every row in the order has its writes
                        do {
                            try batch[writes.last!].writeRow(transaction)  // a row is listed once a write sets it
                        } catch {
                            for index in writes { failures[index] = error }
                            if !db.isInsideTransaction { throw error }
                        }
                    }
                }
                for (index, operation) in batch.enumerated() {
                    let row = operation.row
                    if row == nil, !unwrittenOrder.isEmpty { try writeRows() }
                    do {
                        if operation.runsOneStatement || row != nil {
                            try operation.perform(transaction)
                        } else {
                            try transaction.savepoint { try operation.perform(transaction) }
                        }
                        if let row {
                            if unwritten[row] == nil { unwrittenOrder.append(row) }
                            unwritten[row, default: []].append(index)
                        }
                    } catch {
                        failures[index] = error
                        // SQLite rolls the whole transaction back on some errors (a full disk among them): nothing
                        // of the batch is left to commit.
                        if !db.isInsideTransaction { throw error }
                    }
                }
                try writeRows()
                return generation
            }
            owed.committed(generation)
            let diskFull = StoreError.diskFull(path: path)
            let foundFull = failures.contains { failure in failure.map { StoreError(writing: path, $0) } == diskFull }
            full.found.store(foundFull, ordering: .relaxed)
        } catch {
            let failure = StoreError(writing: path, error)
            failures = failures.map { $0 ?? failure }
            full.found.store(failure == .diskFull(path: path), ordering: .relaxed)
        }
        finishing {
            for (operation, failure) in zip(batch, failures) { operation.finish(failure) }
        }
    }
}
