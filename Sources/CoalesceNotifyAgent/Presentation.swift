import Varlink

/// One presentation as io.coalesced.Notifications.Presentations streams it, with what the agent shows of it.
struct Presentation: Sendable, Hashable {
    struct Action: Sendable, Hashable {
        var id: String
        var title: String
    }

    var app: String
    var id: String
    var title: String
    var subtitle: String?
    var body: String?
    var sound: String?
    var threadId: String?
    var categoryId: String?
    var actions: [Action]
    var style: String
    var count: Int

    /// Reads a `Presentation` of the interface; `nil` when a field it cannot do without is missing.
    init?(_ object: JSONObject) {
        guard let app = object.string("app"), let id = object.string("id"),
            let content = object["content"]?.objectValue, let title = content.string("title")
        else { return nil }
        self.app = app
        self.id = id
        self.title = title
        self.subtitle = content.string("subtitle")
        self.body = content.string("body")
        self.sound = content.string("sound")
        self.threadId = content.string("threadId")
        self.categoryId = content.string("categoryId")
        self.actions = (content["actions"]?.arrayValue ?? []).compactMap { value in
            guard let action = value.objectValue, let id = action.string("id"), let title = action.string("title")
            else { return nil }
            return Action(id: id, title: title)
        }
        self.style = object.string("style") ?? "banner"
        self.count = Int(object["count"]?.intValue ?? 1)
    }

    /// The notification's body: the subtitle and the body on lines of their own, and for missed fires coalesced
    /// into one, how many it stands for.
    var desktopBody: String {
        var lines = [self.subtitle, self.body].compactMap { $0 }.filter { !$0.isEmpty }
        if self.count > 1 { lines.append("(\(self.count) notifications)") }
        return lines.joined(separator: "\n")
    }

    /// Which earlier notification this one replaces on the desktop: the last of its thread where the server keeps
    /// no history (it would otherwise pile up one per fire), else the last of its request, as a request scheduled
    /// again replaces its delivered notification.
    func slot(perThread: Bool) -> Slot {
        if perThread, let threadId = self.threadId { return .thread(app: self.app, threadId: threadId) }
        return .request(app: self.app, id: self.id)
    }

    enum Slot: Hashable {
        case thread(app: String, threadId: String)
        case request(app: String, id: String)
    }
}
