// A notes app for coalesced, on the CoalesceClient library: it keeps a count of unread notes, which producers
// raise by posting `badge` events, and saves it on its way to the background.
import CoalesceClient

#if canImport(Glibc)
import Glibc
#endif

/// What a producer posts: `{"unread": 2}`.
struct Badge: Codable {
    var unread: Int
}

@main
struct NotesApp {
    static func main() async {
        // Connects to $COALESCED_SOCKET, else to the system instance's socket.
        let app = CoalescedApp(
            AppDeclaration(name: "org.example.notes", kinds: ["badge": KindDeclaration(.sum(field: "unread"))])
        )
        var unread = 0
        do {
            // Registers, attaches, and acknowledges each callback and event when the loop body ends.
            for try await delivery in app.events {
                switch delivery {
                case .didFinishLaunching(let options):
                    unread = Int(options.restoredState ?? "") ?? 0
                    say("launched \(options.destination) unread=\(unread)")
                case .didBecomeActive:
                    say("active")
                case .willResignActive:
                    say("inactive")
                case .didEnterBackground:
                    say("background")
                    // Keeps the app running in the background until the task ends; then it is suspended.
                    let task = try await app.beginBackgroundTask("save-notes")
                    Task { [unread] in
                        do {
                            try await app.saveState(String(unread))    // handed back by the next launch
                            say("saved unread=\(unread)")
                            try await app.endBackgroundTask(task)
                        } catch {
                            say("not saved: \(error)")
                        }
                    }
                case .willEnterForeground:
                    say("foreground")
                case .event(let event) where event.kind == "badge":
                    let badge = try event.decode(Badge.self)
                    unread += badge.unread
                    say("badge +\(badge.unread) from \(event.count) posts, unread=\(unread)")
                case .willTerminate:
                    say("terminating")    // the sequence ends after it, and the process exits
                default:
                    break
                }
            }
            say("exited")
        } catch {
            say("error: \(error)")
            exit(1)
        }
    }
}

/// One line on standard output, written at once (print's output to a pipe waits in a buffer).
func say(_ line: String) {
    let text = line + "\n"
    _ = text.withCString { write(1, $0, strlen($0)) }
}
