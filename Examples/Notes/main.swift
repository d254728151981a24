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
        setvbuf(stdout, nil, _IOLBF, 0)    // one line at a time, for whoever reads the output
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
                    print("launched \(options.destination) unread=\(unread)")
                case .didBecomeActive:
                    print("active")
                case .willResignActive:
                    print("inactive")
                case .didEnterBackground:
                    print("background")
                    // Keeps the app running in the background until the task ends; then it is suspended.
                    let task = try await app.beginBackgroundTask("save-notes")
                    Task { [unread] in
                        do {
                            try await app.saveState(String(unread))    // handed back by the next launch
                            print("saved unread=\(unread)")
                            try await app.endBackgroundTask(task)
                        } catch {
                            print("not saved: \(error)")
                        }
                    }
                case .willEnterForeground:
                    print("foreground")
                case .event(let event) where event.kind == "badge":
                    let badge = try event.decode(Badge.self)
                    unread += badge.unread
                    print("badge +\(badge.unread) from \(event.count) posts, unread=\(unread)")
                case .willTerminate:
                    print("terminating")    // the sequence ends after it, and the process exits
                default:
                    break
                }
            }
            print("exited")
        } catch {
            print("error: \(error)")
            exit(1)
        }
    }
}
