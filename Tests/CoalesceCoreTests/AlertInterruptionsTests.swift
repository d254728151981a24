import CoalesceCore
import Testing

/// Which presentations interrupt an app, and when its interruption begins and ends, as a table of inputs and what
/// the app's lifecycle is told.
@Suite struct AlertInterruptionsTests {
    @Test(arguments: [
        (AlertStyle.alert, AppState.active, true),
        (.banner, .active, false),
        (.alert, .inactive, false),
        (.alert, .background, false),
        (.alert, .suspended, false),
        (.alert, .notRunning, false),
    ])
    func onlyAnAlertOverTheAppOnScreenInterruptsIt(_ style: AlertStyle, _ state: AppState, _ interrupts: Bool) {
        #expect(AlertInterruptions.interrupts(style: style, appIn: state) == interrupts)
    }

    enum Input {
        case presented(String, AppName)
        case answered(String, AppName)
        case removed([String], AppName)
    }

    /// Each row: the inputs, then what the lifecycle is told after each.
    @Test(arguments: [
        ([Input.presented("a", mailApp)], [AlertInterruptions.Change.begins(mailApp)]),
        ([.presented("a", mailApp), .answered("a", mailApp)], [.begins(mailApp), .ends(mailApp)]),
        // Two alerts: the interruption lasts until both are answered, in either order.
        ([.presented("a", mailApp), .presented("b", mailApp), .answered("b", mailApp), .answered("a", mailApp)], [.begins(mailApp), nil, nil, .ends(mailApp)]),
        // An answer to what does not interrupt, or twice, tells nothing.
        ([.answered("a", mailApp)], [nil]),
        ([.presented("a", mailApp), .answered("a", mailApp), .answered("a", mailApp)], [.begins(mailApp), .ends(mailApp), nil]),
        // Taken off the delivered list: ends once none is left.
        ([.presented("a", mailApp), .presented("b", mailApp), .removed(["a"], mailApp), .removed(["b", "x"], mailApp)], [.begins(mailApp), nil, nil, .ends(mailApp)]),
        ([.presented("a", mailApp), .removed(["x"], mailApp)], [.begins(mailApp), nil]),
        ([.removed(["a"], mailApp)], [nil]),
        // Apps are apart: one's answer does not end the other's.
        ([.presented("a", mailApp), .presented("a", clockApp), .answered("a", clockApp), .answered("a", mailApp)], [.begins(mailApp), .begins(clockApp), .ends(clockApp), .ends(mailApp)]),
        // The same id presented again (a repeating request) is one alert.
        ([.presented("a", mailApp), .presented("a", mailApp), .answered("a", mailApp)], [.begins(mailApp), nil, .ends(mailApp)]),
    ] as [([Input], [AlertInterruptions.Change?])])
    func anInterruptionBeginsWithTheFirstAlertAndEndsWithTheLast(_ inputs: [Input], _ told: [AlertInterruptions.Change?]) {
        var interruptions = AlertInterruptions()
        var changes: [AlertInterruptions.Change?] = []
        for input in inputs {
            switch input {
            case .presented(let id, let app): changes.append(interruptions.presented(id, over: app))
            case .answered(let id, let app): changes.append(interruptions.answered(id, of: app))
            case .removed(let ids, let app): changes.append(interruptions.removed(ids, of: app))
            }
        }
        #expect(changes == told)
        if told.last == .ends(mailApp) { #expect(interruptions.alerts(of: mailApp).isEmpty) }
    }
}
