@testable import CoalesceScreenAgent
import Testing
import Varlink

/// The sway backend's pure parts: sway's IPC framing, and its layout tree read as the session's windows.
@Suite struct SwayTreeTests {
    @Test func messagesAreFramedWithTheMagicTheLengthAndTheTypeAndTakenOnlyWhole() throws {
        let tree = SwayMessage.encode(.tree)
        #expect(tree == Array("i3-ipc".utf8) + [0, 0, 0, 0, 4, 0, 0, 0])
        let subscribe = SwayMessage.encode(.subscribe, #"["window"]"#)
        #expect(subscribe.count == 14 + 10)

        // Two messages and the start of a third, as one read may bring them.
        var buffer = subscribe + tree + Array(subscribe.prefix(9))
        let taken = try SwayMessage.take(from: &buffer)
        #expect(taken.map(\.type) == [2, 4])
        #expect(taken.first.map { String(decoding: $0.payload, as: UTF8.self) } == #"["window"]"#)
        #expect(buffer == Array(subscribe.prefix(9)), "the part of the third stays for the next read")

        var garbage = Array("HTTP/1.1 400 Bad".utf8)
        #expect(throws: SwayError.self) { try SwayMessage.take(from: &garbage) }
    }

    @Test func viewsAreWindowsFocusedShownOrHiddenAndContainersAreNot() throws {
        let tree = try JSONParser.parse(
            """
            {"id": 1, "type": "root", "nodes": [
              {"id": 2, "type": "output", "name": "HEADLESS-1", "nodes": [
                {"id": 3, "type": "workspace", "name": "1", "nodes": [
                  {"id": 10, "type": "con", "layout": "splitv", "nodes": [
                    {"id": 11, "type": "con", "pid": 100, "app_id": "org.example.mail", "name": "Inbox",
                     "focused": true, "visible": true, "nodes": []},
                    {"id": 12, "type": "con", "pid": 100, "app_id": "org.example.mail", "name": "Draft\\tone",
                     "focused": false, "visible": true, "nodes": []}
                  ]}
                ], "floating_nodes": [
                  {"id": 13, "type": "floating_con", "pid": 200, "app_id": null, "name": "xterm",
                   "window_properties": {"class": "XTerm", "instance": "xterm"}, "focused": false, "visible": true, "nodes": []}
                ]},
                {"id": 4, "type": "workspace", "name": "2", "nodes": [
                  {"id": 14, "type": "con", "pid": 300, "app_id": "org.example.maps", "name": "Map",
                   "focused": false, "visible": false, "nodes": []}
                ]}
              ]},
              {"id": 5, "type": "output", "name": "__i3", "nodes": [
                {"id": 6, "type": "workspace", "name": "__i3_scratch", "floating_nodes": [
                  {"id": 15, "type": "floating_con", "pid": 400, "app_id": "org.example.notes", "name": "Notes",
                   "focused": false, "visible": false, "nodes": []}
                ]}
              ]}
            ]}
            """
        )
        let windows = SwayTree.windows(in: tree)
        #expect(windows.map(\.id) == ["11", "12", "13", "14", "15"], "the split container is none")
        #expect(windows.map(\.presentation) == [.focused, .shown, .shown, .hidden, .hidden])
        #expect(windows.map(\.appID) == ["org.example.mail", "org.example.mail", "XTerm", "org.example.maps", "org.example.notes"])
        #expect(windows.map(\.pid) == [100, 100, 200, 300, 400])
        #expect(windows[1].title == "Draft one", "a control character in a title becomes a space: the daemon takes none")
    }

    @Test func aWindowIsReportedOnlyWithAnIdAndAnAppIdTheDaemonTakesAndATitleCutToItsBound() {
        #expect(SessionWindow(id: "1", appID: "", pid: 1, presentation: .shown, title: "") == nil)
        #expect(SessionWindow(id: "1", appID: "a\nb", pid: 1, presentation: .shown, title: "") == nil)
        #expect(SessionWindow(id: String(repeating: "9", count: 256), appID: "a", pid: 1, presentation: .shown, title: "") == nil)
        let long = SessionWindow(id: "1", appID: "a", pid: 0, presentation: .shown, title: String(repeating: "é", count: 600))
        #expect(long?.title.utf8.count == 1024, "cut at a character's end: 512 two-byte characters")
        #expect(long?.pid == nil, "no process is pid 0")
        #expect(long?.wire == ["id": "1", "appId": "a", "presentation": "shown", "title": .string(String(repeating: "é", count: 512))])
    }
}
