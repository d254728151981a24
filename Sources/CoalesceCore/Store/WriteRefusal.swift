/// What the daemon does when the store refuses a write (a full disk, a damaged file), whoever made it: events,
/// notifications, registrations.
///
/// The writer that made the write takes back what it changed in memory by its own means (an inbox takes its
/// changes back, the notification center reads the store again, a journal watch reads the journal again from the
/// positions on disk, a registration is undone), and whoever asked hears that the store failed. What cannot wait
/// for the next request (a delivery of what an app held) is tried again after ``retryDelay``. The journal is told
/// once when the store starts refusing a writer's writes, and once when it keeps one again: not once per write,
/// which on a full disk would be once per post. Each writer counts on its own: on a nearly full disk a small write
/// of one may be kept between refusals of another's, and that is no news about the other.
public struct WriteRefusal: Sendable {
    /// How long after a refusal what its writer could not keep is tried again.
    public static let retryDelay = Duration.seconds(1)

    /// What the journal is told.
    public enum Notice: Equatable, Sendable {
        /// The store refused a write of `what`, the first since it last kept one.
        case failing(what: String, reason: String)
        /// It kept a write of `what`, the first since it refused one.
        case writingAgain(what: String)
    }

    /// Whether the last write of each writer the store answered was refused.
    private var failingWriters: [String: Bool] = [:]
    /// What a writer that has written nothing yet counts as.
    private let failingAtFirst: Bool

    /// - Parameter failing: the store is known not to be writable already (a start on a full disk has said so).
    public init(failing: Bool = false) {
        self.failingAtFirst = failing
    }

    /// Whether the last write of `what` was refused.
    public func failing(_ what: String) -> Bool {
        self.failingWriters[what] ?? self.failingAtFirst
    }

    /// The store answered a write of `what`: kept it (`refusal` nil), or refused it and why. Returns what the
    /// journal is told, if anything.
    public mutating func answered(_ what: String, refusal: String?) -> Notice? {
        let failing = refusal != nil
        guard failing != self.failing(what) else { return nil }
        self.failingWriters[what] = failing
        return refusal.map { .failing(what: what, reason: $0) } ?? .writingAgain(what: what)
    }
}
