import CoalesceCore
import CoalesceWire
import Varlink

/// One presentation as io.coalesced.Notifications.Presentations streams it, with what the agent shows of it.
struct Presentation: Sendable, Hashable {
    /// The presentation as the daemon wrote it.
    var form: AlertPresentationForm

    /// Reads a `Presentation` of the interface; `nil` when it is not one (``AlertPresentationForm/init(wire:)``).
    init?(_ object: JSONObject) {
        // The caller logs the object it could not read, which shows what is wrong with it.
        guard let form = try? AlertPresentationForm(wire: .object(object)) else { return nil }
        self.form = form
    }

    var app: String { self.form.app }
    var id: String { self.form.id }
    var title: String { self.form.content.title }
    var sound: String? { self.form.content.sound }
    var threadId: String? { self.form.content.threadID }
    var categoryId: String? { self.form.content.categoryID }
    /// The buttons, for the desktop's action list.
    var actions: [(id: String, title: String)] { self.form.content.actions.map { ($0.id, $0.title) } }
    var style: String { self.form.style.rawValue }

    /// The notification's body: the subtitle and the body on lines of their own, and for missed fires coalesced
    /// into one, how many it stands for.
    var desktopBody: String {
        var lines = [self.form.content.subtitle, self.form.content.body].filter { !$0.isEmpty }
        if self.form.count > 1 { lines.append("(\(self.form.count) notifications)") }
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
