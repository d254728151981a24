/// When a request fires.
public enum AlertTrigger: Sendable, Hashable {
    /// At once, when it is scheduled (a request without a trigger).
    case now
    /// At an instant on the wall clock; an instant already past fires at once, late by as much.
    case at(WallTime)
    /// After an interval on the boot-time clock (time asleep counts); a repeating one fires every `interval`,
    /// which must be at least a minute (``AlertTrigger/minimumRepeatInterval``), as on iOS.
    case after(Duration, repeats: Bool)
    /// At the dates the components match (``CalendarComponents/next(after:in:)``), in a zone or in floating
    /// local time; once, or at each date.
    case calendar(CalendarComponents, zone: CalendarZone, repeats: Bool)

    /// The shortest interval a repeating `after` trigger takes.
    public static let minimumRepeatInterval: Duration = .seconds(60)

    /// Whether it fires more than once.
    public var repeats: Bool {
        switch self {
        case .now, .at: return false
        case .after(_, let repeats), .calendar(_, _, let repeats): return repeats
        }
    }
}

/// The time zone a calendar trigger's components are read in.
public enum CalendarZone: Sendable, Hashable {
    /// The zone the machine is in, whichever it is when the date comes (``AlertScheduler/timeZoneChanged(to:now:)``):
    /// 08:00 stays 08:00 on the wall after a move to another zone.
    case floating
    /// This zone, whatever the machine's: the dates stay the same instants when the machine's zone changes.
    case zoned(ZoneRules)
}

/// What a notification shows, as the app gave it.
public struct AlertContent: Sendable, Hashable {
    public var title: String
    public var subtitle: String
    public var body: String
    /// A sound's name; `nil`: silent.
    public var sound: String?
    /// The app's badge once presented: a number, 0 to clear it; `nil`: left as it is.
    public var badge: Int?
    /// Notifications of one thread are grouped, and late ones coalesced together (``LatePolicy/coalesce``).
    public var threadID: String?
    /// The category the app gives it, passed to the desktop.
    public var categoryID: String?
    /// The buttons it offers besides opening and dismissing it.
    public var actions: [AlertButton]
    /// The app's user info: the text of a JSON object, passed back with a response as it came (the shell checks
    /// it is an object; the core never reads it).
    public var userInfo: String

    public init(
        title: String, subtitle: String = "", body: String = "", sound: String? = nil, badge: Int? = nil,
        threadID: String? = nil, categoryID: String? = nil, actions: [AlertButton] = [], userInfo: String = "{}"
    ) {
        self.actions = actions
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.sound = sound
        self.badge = badge
        self.threadID = threadID
        self.categoryID = categoryID
        self.userInfo = userInfo
    }
}

/// A button a notification offers: answering with it (``AlertResponse``) names its id.
public struct AlertButton: Sendable, Hashable {
    public var id: String
    public var title: String
    /// Answering with it brings the app to the foreground; otherwise the app is launched into the background.
    public var foreground: Bool

    /// The most buttons a notification offers.
    public static let maximumCount = 8
    /// The answers every notification takes, which no button may be named.
    public static let builtIn: Set<String> = ["default", "dismiss"]

    public init(id: String, title: String, foreground: Bool = false) {
        self.id = id
        self.title = title
        self.foreground = foreground
    }
}

/// How a notification interrupts: a banner does not; an alert over the active app interrupts it until answered.
public enum AlertStyle: String, Sendable, Hashable, CaseIterable {
    case banner, alert
}

/// What becomes of the fires a request missed: while the machine slept, the daemon was down, or the clock was set
/// past them. A fire is missed when it is handled more than ``AlertConfiguration/lateAfter`` after its date.
public enum LatePolicy: Sendable, Hashable {
    /// Each missed fire is presented, marked late.
    case deliver
    /// The missed fires of one app and thread, of all its requests with this policy, are presented as one, with
    /// the count; the default.
    case coalesce
    /// A missed fire later than the grace period is dropped, and the drop reported; one within it is presented,
    /// marked late.
    case dropAfter(Duration)
}

/// One request an app schedules; its id names it within the app, and scheduling the same id again replaces it
/// whole.
public struct AlertRequest: Sendable, Hashable {
    public var id: String
    public var trigger: AlertTrigger
    public var content: AlertContent
    public var style: AlertStyle
    public var late: LatePolicy

    public init(id: String, trigger: AlertTrigger, content: AlertContent, style: AlertStyle = .banner, late: LatePolicy = .coalesce) {
        self.id = id
        self.trigger = trigger
        self.content = content
        self.style = style
        self.late = late
    }
}

/// A request refused; nothing changed.
public enum AlertError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The app has `pending` requests, as many as its `limit`.
    case pendingLimit(limit: Int, pending: Int)
    case emptyID
    case intervalNotPositive(Duration)
    case repeatingIntervalTooShort(Duration)
    case noComponents
    case componentOutOfRange(name: String, value: Int, range: ClosedRange<Int>)
    /// The components match no date from now up to ``CalendarComponents/lastYear``.
    case neverFires(CalendarComponents, zone: String)
    case negativeGrace(Duration)
    case tooManyActions(Int)
    case badActionID(String)
    case duplicateActionID(String)
    /// A string of the request that holds a control character where none may be (``ControlCharacters``).
    case controlCharacter(String)

    public var description: String {
        switch self {
        case .pendingLimit(let limit, let pending):
            return "the app has \(pending) pending notification requests and may have at most \(limit); "
                + "remove one or reuse an id to replace it"
        case .emptyID: return "a notification request needs a non-empty id"
        case .intervalNotPositive(let interval): return "the interval \(interval) is not positive"
        case .repeatingIntervalTooShort(let interval):
            return "a repeating interval must be at least 60 seconds, not \(interval)"
        case .noComponents: return "a calendar trigger needs at least one of year, month, day, weekday, hour, minute, second"
        case .componentOutOfRange(let name, let value, let range):
            return "\(name) \(value) is outside \(range.lowerBound)...\(range.upperBound)"
        case .neverFires(let components, let zone):
            return "'\(components)' in \(zone) matches no date from now to the year \(CalendarComponents.lastYear)"
        case .negativeGrace(let grace): return "the grace period \(grace) of dropAfter is negative"
        case .tooManyActions(let count):
            return "a notification offers at most \(AlertButton.maximumCount) actions, not \(count)"
        case .badActionID(let id):
            return "the action id '\(id)' is empty or one of default and dismiss, which every notification takes"
        case .duplicateActionID(let id): return "the action id '\(id)' is given twice"
        case .controlCharacter(let reason): return reason
        }
    }
}

extension AlertRequest {
    /// Checks the request on its own; the scheduler checks the rest (the pending limit, a date to come).
    /// - Parameter namesAsTheyAre: a control character in a name is let through (an older daemon's stored request,
    ///   taken up as it was); everything else is checked all the same.
    /// - Throws: ``AlertError``.
    public func validate(namesAsTheyAre: Bool = false) throws(AlertError) {
        guard !self.id.isEmpty else { throw .emptyID }
        if !namesAsTheyAre, let problem = self.controlCharacterProblem { throw .controlCharacter(problem) }
        if case .dropAfter(let grace) = self.late, grace < .zero { throw .negativeGrace(grace) }
        let buttons = self.content.actions
        guard buttons.count <= AlertButton.maximumCount else { throw .tooManyActions(buttons.count) }
        var ids: Set<String> = []
        for button in buttons {
            guard !button.id.isEmpty, !AlertButton.builtIn.contains(button.id) else { throw .badActionID(button.id) }
            guard ids.insert(button.id).inserted else { throw .duplicateActionID(button.id) }
        }
        switch self.trigger {
        case .now, .at: break
        case .after(let interval, let repeats):
            guard interval > .zero else { throw .intervalNotPositive(interval) }
            if repeats, interval < AlertTrigger.minimumRepeatInterval { throw .repeatingIntervalTooShort(interval) }
        case .calendar(let components, _, _):
            try components.validate()
        }
    }
}

extension AlertRequest {
    /// Why a string of the request cannot be kept as it is: a control character in a name (the id, the thread,
    /// the category, an action's id), or a NUL in text; `nil` when every string can.
    var controlCharacterProblem: String? {
        let content = self.content
        var names = [("the id", self.id)]
        if let thread = content.threadID { names.append(("threadId", thread)) }
        if let category = content.categoryID { names.append(("categoryId", category)) }
        names += content.actions.map { ("the action id '\($0.id)'", $0.id) }
        for (field, text) in names {
            if let problem = ControlCharacters.problem(inName: text, field: field) { return problem }
        }
        var texts = [("title", content.title), ("subtitle", content.subtitle), ("body", content.body), ("userInfo", content.userInfo)]
        if let sound = content.sound { texts.append(("sound", sound)) }
        texts += content.actions.map { ("the title of action '\($0.id)'", $0.title) }
        for (field, text) in texts {
            if let problem = ControlCharacters.problem(inText: text, field: field) { return problem }
        }
        return nil
    }
}
