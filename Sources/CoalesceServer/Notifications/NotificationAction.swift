import CoalesceCore
import CoalesceStore
import NIOCore
import Varlink

/// One thing the notification center decided under its lock and carries out after letting go
/// (``NotificationCenter/decide(_:)``), in the order decided (``Outbox``): the store's writes reach it and the
/// timers their dates in the order the scheduler made them.
enum NotificationAction: Sendable {
    /// A change to what the store keeps; `finished` hears once it is on disk, or why it is not.
    case write(Store.AlertChange, finished: @Sendable (Result<Void, StoreError>) -> Void)
    /// The alert timers, to the scheduler's next dates.
    case arm(wall: WallTime?, boot: BootTime?)
    /// The zone link watched: a floating calendar rule depends on it.
    case watchZone
    /// The presentation rate's timer, for its next window end `after` from now; `nil` cancels it.
    case armRate(after: TimeAmount?)
    /// Replies on an agent's stream.
    case send(VarlinkResponder, [JSONObject])
}
