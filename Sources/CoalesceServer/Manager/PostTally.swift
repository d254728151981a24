import CoalesceCore
import NIOConcurrencyHelpers

/// Answers a post to a topic once every subscriber it went to has its write on disk or refused it: a success when
/// any kept it (listing those that refused), else the first refusal.
final class PostTally: Sendable {
    private struct State {
        var remaining: Int
        var sent = false
        var refused: [(app: AppName, error: AppError)] = []
    }

    private let state: NIOLockedValueBox<State>
    private let recipients: [AppName]
    private let target: String
    private let answer: @Sendable (AppManager.PostResult) -> Void

    init(recipients: [AppName], target: String, answer: @escaping @Sendable (AppManager.PostResult) -> Void) {
        self.state = NIOLockedValueBox(State(remaining: recipients.count))
        self.recipients = recipients
        self.target = target
        self.answer = answer
    }

    /// One subscriber's write finished; `sent` says whether it sends the event.
    func finished(_ app: AppName, sent: Bool, _ failure: (any Error)?) {
        let result = self.state.withLockedValue { state -> AppManager.PostResult? in
            if let failure {
                state.refused.append((app, AppManager.postError(failure, target: self.target)))
            } else if sent {
                state.sent = true
            }
            state.remaining -= 1
            guard state.remaining == 0 else { return nil }
            // Refusals in the order of the recipients, not of the writer's answers.
            let refused = self.recipients.compactMap { app in state.refused.first { $0.app == app } }
            guard refused.count < self.recipients.count else { return .failure(refused[0].error) }
            return .success(
                AppManager.PostOutcome(delivered: state.sent, recipients: self.recipients.count - refused.count, refused: refused)
            )
        }
        if let result { self.answer(result) }
    }
}
