import CoalesceCore
import Testing

/// ``PresentationRate`` alone, on injected boot-time instants: each row feeds presentations and window ends and
/// compares what each comes to, written out as text.
@Suite struct PresentationRateTests {
    static let mail = try! AppName("org.example.mail")
    static let chat = try! AppName("org.example.chat")

    /// One input: a presentation of `fires` fires by `owner`'s `app` in `thread` at `ms`, or the windows ended at `ms`.
    enum Input: CustomStringConvertible {
        case present(at: Int, owner: UInt32 = 1000, app: AppName = mail, thread: String? = nil, id: String, fires: Int = 1, late: Bool = false)
        case due(at: Int)

        var description: String {
            switch self {
            case .present(let ms, let owner, let app, let thread, let id, _, _): "\(ms)ms \(owner) \(app)/\(thread ?? "-") \(id)"
            case .due(let ms): "due \(ms)ms"
            }
        }
    }

    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var burst = 2
        var intervalMs = 100
        var inputs: [Input]
        /// What each input comes to: `present`; `hold ID app/thread ×COUNT` with `new` for a thread that held
        /// nothing and `passed` for the start of a stretch; for a window end the presentations and stretch ends it
        /// gives, `|`-separated (`-`: nothing).
        var expected: [String]
        var testDescription: String { self.name }
    }

    static func at(_ ms: Int) -> BootTime { BootTime(nanoseconds: Int64(ms) * 1_000_000) }

    static func described(_ held: PresentationRate.Held) -> String {
        let app = held.thread.app == Self.mail ? "mail" : "chat"
        let late = held.presentation.late ? " late" : ""
        return "\(held.presentation.id) \(app)/\(held.thread.thread ?? "-") ×\(held.presentation.count)\(late)"
    }

    static func run(_ row: Row) -> (outcomes: [String], rate: PresentationRate) {
        var rate = PresentationRate(bound: .init(burst: row.burst, interval: .milliseconds(row.intervalMs)))
        var outcomes: [String] = []
        for input in row.inputs {
            switch input {
            case .present(let ms, let owner, let app, let thread, let id, let fires, let late):
                let presentation = AlertPresentation(
                    app: app, id: id, content: AlertContent(title: id, threadID: thread), style: .banner,
                    fires: (1...fires).map { AlertFire(id: id, number: $0, date: WallTime(seconds: Int64($0))) }, late: late
                )
                switch rate.admit(presentation, owner: owner, now: Self.at(ms)) {
                case .present: outcomes.append("present")
                case .hold(let held, let newThread, let passed):
                    outcomes.append("hold " + Self.described(held) + (newThread ? " new" : "") + (passed ? " passed" : ""))
                }
            case .due(let ms):
                let actions = rate.due(now: Self.at(ms)).map { action in
                    switch action {
                    case .present(let held): Self.described(held)
                    case .ended(let owner, let held, let presented): "ended \(owner): \(held) into \(presented)"
                    }
                }
                outcomes.append(actions.isEmpty ? "-" : actions.joined(separator: " | "))
            }
        }
        return (outcomes, rate)
    }

    static let rows: [Row] = [
        Row(
            name: "within the bound each is presented at once, and a window with nothing held ends quietly",
            inputs: [.present(at: 0, id: "a"), .present(at: 50, id: "b"), .due(at: 100), .present(at: 150, id: "c"), .present(at: 160, id: "d")],
            expected: ["present", "present", "-", "present", "present"]
        ),
        Row(
            name: "past the burst, one thread's presentations fold into one, presented when the window ends",
            inputs: [
                .present(at: 0, thread: "t", id: "a"), .present(at: 10, thread: "t", id: "b"), .present(at: 20, thread: "t", id: "c"),
                .present(at: 30, thread: "t", id: "d"), .present(at: 40, thread: "t", id: "e"), .due(at: 99), .due(at: 100),
            ],
            expected: ["present", "present", "hold c mail/t ×1 new passed", "hold d mail/t ×2", "hold e mail/t ×3", "-", "e mail/t ×3"]
        ),
        Row(
            name: "a held presentation opens the next window; the stretch ends with a window that holds nothing",
            inputs: [
                .present(at: 0, id: "a"), .present(at: 0, id: "b"), .present(at: 0, id: "c"), .due(at: 100),
                .present(at: 150, id: "d"), .present(at: 160, id: "e"), .due(at: 200), .due(at: 300), .present(at: 310, id: "f"),
                .present(at: 311, id: "g"), .present(at: 312, id: "h"),
            ],
            expected: [
                "present", "present", "hold c mail/- ×1 new passed", "c mail/- ×1", "present", "hold e mail/- ×1 new",
                "e mail/- ×1", "ended 1000: 2 into 2", "present", "present", "hold h mail/- ×1 new passed",
            ]
        ),
        Row(
            name: "a stretch ends only after a whole window with nothing held, however late the timer runs",
            inputs: [
                .present(at: 0, id: "a"), .present(at: 0, id: "b"), .present(at: 0, id: "c"), .due(at: 100),
                .present(at: 250, id: "d"), .due(at: 300), .due(at: 350),
            ],
            expected: ["present", "present", "hold c mail/- ×1 new passed", "c mail/- ×1", "present", "-", "ended 1000: 1 into 1"]
        ),
        Row(
            name: "threads fold apart, a threadless presentation by its app, and the held ones go out oldest thread first",
            inputs: [
                .present(at: 0, id: "a"), .present(at: 0, id: "b"), .present(at: 1, thread: "x", id: "c"),
                .present(at: 2, id: "d"), .present(at: 3, thread: "x", id: "e"), .present(at: 4, app: chat, id: "f"), .due(at: 100),
                .due(at: 200),
            ],
            expected: [
                "present", "present", "hold c mail/x ×1 new passed", "hold d mail/- ×1 new", "hold e mail/x ×2",
                "hold f chat/- ×1 new", "e mail/x ×2 | d mail/- ×1", "f chat/- ×1",
            ]
        ),
        Row(
            name: "past a burst of threads held, a further thread folds into its app's threadless presentation",
            inputs: [
                .present(at: 0, thread: "1", id: "a"), .present(at: 0, thread: "2", id: "b"), .present(at: 1, thread: "3", id: "c"),
                .present(at: 2, thread: "4", id: "d"), .present(at: 3, thread: "5", id: "e"), .present(at: 4, thread: "6", id: "f"),
                .present(at: 5, thread: "3", id: "g"),
            ],
            expected: [
                "present", "present", "hold c mail/3 ×1 new passed", "hold d mail/4 ×1 new", "hold e mail/- ×1 new",
                "hold f mail/- ×2", "hold g mail/3 ×2",
            ]
        ),
        Row(
            name: "each user has a bound of its own, and apps of one user share theirs",
            inputs: [
                .present(at: 0, owner: 1, id: "a"), .present(at: 0, owner: 1, app: chat, id: "b"), .present(at: 0, owner: 2, id: "c"),
                .present(at: 0, owner: 2, id: "d"), .present(at: 1, owner: 1, app: chat, id: "e"), .present(at: 1, owner: 2, id: "f"),
                .due(at: 100), .due(at: 200),
            ],
            expected: [
                "present", "present", "present", "present", "hold e chat/- ×1 new passed", "hold f mail/- ×1 new passed",
                "e chat/- ×1 | f mail/- ×1", "ended 1: 1 into 1 | ended 2: 1 into 1",
            ]
        ),
        Row(
            name: "folded counts add the fires of coalesced missed ones, and late stays late",
            burst: 1,
            inputs: [
                .present(at: 0, id: "a"), .present(at: 1, id: "b", fires: 3, late: true), .present(at: 2, id: "c"),
                .present(at: 3, id: "d", fires: 2), .due(at: 100),
            ],
            expected: ["present", "hold b mail/- ×3 late new passed", "hold c mail/- ×4 late", "hold d mail/- ×6 late", "d mail/- ×6 late"]
        ),
        Row(
            name: "more threads held than a window presents take as many windows",
            burst: 1,
            inputs: [
                .present(at: 0, thread: "1", id: "a"), .present(at: 0, thread: "1", id: "b"), .present(at: 0, app: chat, id: "c"),
                .present(at: 50, thread: "1", id: "d"), .due(at: 100), .present(at: 120, app: chat, id: "e"), .due(at: 200), .due(at: 300),
                .due(at: 400),
            ],
            expected: [
                "present", "hold b mail/1 ×1 new passed", "hold c chat/- ×1 new", "hold d mail/1 ×2", "d mail/1 ×2",
                "hold e chat/- ×2", "e chat/- ×2", "ended 1000: 4 into 2", "-",
            ]
        ),
    ]

    @Test(arguments: Self.rows)
    func row(_ row: Row) {
        let (outcomes, _) = Self.run(row)
        #expect(outcomes == row.expected, "\(zip(row.inputs, outcomes).map { "\($0) → \($1)" }.joined(separator: "\n"))")
    }

    @Test func theNextDueIsTheEndOfTheFirstWindowThatHoldsOrIsInAStretch() {
        var rate = PresentationRate(bound: .init(burst: 1, interval: .milliseconds(100)))
        #expect(rate.admit(Self.presentation("a"), owner: 1, now: Self.at(0)) == .present)
        #expect(rate.nextDue == nil, "nothing held: no timer")
        guard case .hold = rate.admit(Self.presentation("b"), owner: 1, now: Self.at(30)) else {
            Issue.record("not held")
            return
        }
        #expect(rate.nextDue == Self.at(100) && rate.held(of: 1) == 1)
        #expect(rate.due(now: Self.at(100)).count == 1)
        #expect(rate.nextDue == Self.at(200), "the stretch's window")
        #expect(rate.due(now: Self.at(200)) == [.ended(owner: 1, held: 1, presented: 1)])
        #expect(rate.nextDue == nil && rate.held(of: 1) == 0)
    }

    @Test func aForgottenHeldPresentationIsNotPresentedAndItsThreadStartsAgain() {
        var rate = PresentationRate(bound: .init(burst: 1, interval: .milliseconds(100)))
        let thread = PresentationRate.Thread(app: Self.mail, thread: nil)
        #expect(rate.admit(Self.presentation("a"), owner: 1, now: Self.at(0)) == .present)
        _ = rate.admit(Self.presentation("b"), owner: 1, now: Self.at(1))
        rate.forget(thread, of: 1)
        guard case .hold(let held, let newThread, let passed) = rate.admit(Self.presentation("c"), owner: 1, now: Self.at(2)) else {
            Issue.record("not held")
            return
        }
        #expect(newThread && !passed && held.presentation.count == 1, "the stretch goes on; the thread starts again")
        #expect(rate.due(now: Self.at(100)) == [.present(held)])
        #expect(rate.due(now: Self.at(200)) == [.ended(owner: 1, held: 2, presented: 1)])
    }

    @Test func aLowerBoundAppliesFromTheNextInput() {
        var rate = PresentationRate(bound: .init(burst: 3, interval: .milliseconds(100)))
        #expect(rate.admit(Self.presentation("a"), owner: 1, now: Self.at(0)) == .present)
        rate.bound = .init(burst: 1, interval: .milliseconds(100))
        guard case .hold(_, _, let passed) = rate.admit(Self.presentation("b"), owner: 1, now: Self.at(1)) else {
            Issue.record("not held")
            return
        }
        #expect(passed)
    }

    static func presentation(_ id: String) -> AlertPresentation {
        AlertPresentation(
            app: Self.mail, id: id, content: AlertContent(title: id), style: .banner,
            fires: [AlertFire(id: id, number: 1, date: WallTime(seconds: 1))], late: false
        )
    }
}
