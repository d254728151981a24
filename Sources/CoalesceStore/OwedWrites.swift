import GRDB
import Synchronization

/// What a start on a full disk could not write, and writes before anything else: the record that the store is open
/// (``StoreRecord/Mark/open``) and this start's generation.
///
/// Until both are on disk the store serves reads and writes nothing else: each transaction first writes what is
/// still owed, and fails whole when that cannot be written (the disk is still full). The first transaction that
/// commits ends it; nothing has to notice that there is room again.
final class OwedWrites: Sendable {
    private struct State {
        /// The record still says what the daemon before left there: `open` is not yet recorded for this one.
        var record: Bool
        /// This start's generation, not yet in the `meta` table.
        var generation: Int64?
    }

    private let state: Mutex<State>
    private let record: StoreRecord
    /// The database's path, which a full disk is reported under.
    private let path: String

    init(path: String, record: StoreRecord, recordOwed: Bool, generation: Int64?) {
        self.path = path
        self.record = record
        self.state = Mutex(State(record: recordOwed, generation: generation))
    }

    /// Whether everything a start writes is on disk.
    var isEmpty: Bool {
        self.state.withLock { !$0.record && $0.generation == nil }
    }

    /// Whether the record of the daemon before is still the one on disk (nothing of this start's was written).
    var recordOwed: Bool {
        self.state.withLock { $0.record }
    }

    /// Writes the record, if it is owed; called before a transaction, so that a log this start writes to is one the
    /// next start looks for.
    func writeRecord() throws(StoreError) {
        guard self.recordOwed else { return }
        do {
            try self.record.write(.open)
        } catch {
            // The record is a file beside the database: the database is what the person refused knows.
            guard case .diskFull = error else { throw error }
            throw .diskFull(path: self.path)
        }
        self.state.withLock { $0.record = false }
    }

    /// Writes the generation, if it is owed, as the transaction's first statement: it commits with the batch, or
    /// not at all. Returns what it wrote, for ``committed(_:)``.
    func writeGeneration(_ transaction: StoreTransaction) throws(StoreError) -> Int64? {
        guard let generation = self.state.withLock({ $0.generation }) else { return nil }
        try transaction.run(Store.setGeneration, [generation])
        return generation
    }

    /// The transaction that wrote `generation` committed.
    func committed(_ generation: Int64?) {
        guard generation != nil else { return }
        self.state.withLock { $0.generation = nil }
    }
}
