/// Which apps their alerts interrupt. An alert-style notification presented over the app on screen interrupts it,
/// as an iOS alert over an app makes it inactive, until the user answers it or it is taken off the delivered list;
/// the app's interruption begins with its first such alert and ends with its last.
public struct AlertInterruptions: Sendable, Hashable {
    /// What the app's lifecycle is to be told.
    public enum Change: Sendable, Hashable {
        case begins(AppName)
        case ends(AppName)
    }

    /// The alerts interrupting each app, by request id.
    private var alerting: [AppName: Set<String>] = [:]

    public init() {}

    /// Whether a presentation in `style` to an app in `state` interrupts it: an alert over the app on screen. A
    /// banner over the app on screen is the app's own to show (willPresent), and one over an app elsewhere is the
    /// desktop's.
    public static func interrupts(style: AlertStyle, appIn state: AppState) -> Bool {
        style == .alert && state == .active
    }

    /// The alerts interrupting `app`, by request id.
    public func alerts(of app: AppName) -> Set<String> { self.alerting[app] ?? [] }

    /// Alert `id` was presented over `app` on screen: its interruption begins if this is its first.
    public mutating func presented(_ id: String, over app: AppName) -> Change? {
        let first = self.alerting[app]?.isEmpty ?? true
        self.alerting[app, default: []].insert(id)
        return first ? .begins(app) : nil
    }

    /// Alert `id` of `app` was answered: its interruption ends if it was the last.
    public mutating func answered(_ id: String, of app: AppName) -> Change? {
        guard self.alerting[app]?.remove(id) != nil else { return nil }
        guard self.alerting[app]!.isEmpty else { return nil }  // removed from it just above
        self.alerting[app] = nil
        return .ends(app)
    }

    /// Alerts `ids` of `app` were taken off the delivered list, and can no longer be answered: its interruption
    /// ends if none is left.
    public mutating func removed(_ ids: some Sequence<String>, of app: AppName) -> Change? {
        guard var alerting = self.alerting[app] else { return nil }
        alerting.subtract(ids)
        self.alerting[app] = alerting.isEmpty ? nil : alerting
        return alerting.isEmpty ? .ends(app) : nil
    }
}
