import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// Local notifications through the real daemon and socket: scheduled, fired by the daemon's timers, presented to
/// the configured command, the delivered list, the badge and an active app's stream; durable across kill -9, with
/// missed fires handled by their late policy; limits and permissions; responses reaching the app, launching it
/// when it is not running and waiting for it while it is suspended.
@Suite struct NotificationTests {
    static let app = "org.example.reminders"

    /// Where the command writes: one line per presentation.
    let log: TemporaryDirectory
    init() throws { self.log = try TemporaryDirectory() }

    /// A daemon whose presentations the command appends to the log, one line each.
    func daemon(extra: String = "") throws -> DaemonProcess {
        let daemon = try DaemonProcess(configuration: self.configuration(extra: extra))
        try daemon.waitUntilReady()
        return daemon
    }

    func configuration(extra: String = "") -> String {
        """
        [Apps]
        AcknowledgeTimeoutSec=1h
        Suspension=cooperative
        [Notifications]
        Command=printf '%s %s %s count=%s late=%s\\n' "$COALESCED_APP" "$COALESCED_NOTIFICATION" "$COALESCED_TITLE" "$COALESCED_COUNT" "$COALESCED_LATE" >> \(self.log.file("presented.log"))
        \(extra)
        """
    }

    /// The command's lines so far.
    func presented() -> [String] {
        let text = (try? String(contentsOfFile: self.log.file("presented.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init)
    }

    static func schedule(_ client: VarlinkClient, _ request: JSONObject, app: String = Self.app) throws -> JSONObject {
        try client.call("io.coalesced.Notifications.Schedule", ["app": .string(app), "request": .object(request)])
    }

    static func delivered(_ client: VarlinkClient, app: String = Self.app) throws -> [JSONValue] {
        try client.call("io.coalesced.Notifications.ListDelivered", ["app": .string(app)])["delivered"]?.arrayValue ?? []
    }

    static func now() -> Double { Date().timeIntervalSince1970 }

    @Test func aScheduledNotificationFiresAndIsPresentedListedAndBadged() async throws {
        let marker = "fires-\(UUID().uuidString.prefix(8))"
        let daemon = try await onThread { try self.daemon() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
            let before = Self.now()
            let next = try Self.schedule(
                client,
                ["id": "r1", "trigger": ["after": 1], "content": ["title": .string(marker), "body": "b", "badge": 3, "threadId": "t"]]
            )["next"]?.doubleValue ?? 0
            #expect(next > before + 0.9 && next < Self.now() + 1.1, "the next date is a second from now")
            let pending = try client.call("io.coalesced.Notifications.ListPending", ["app": .string(Self.app)])["pending"]?.arrayValue ?? []
            #expect(pending.map { $0["request"]?["id"] } == ["r1"])
            // The command sink's line, then the delivered list and the badge.
            try waitUntil("the command to show the notification", timeout: .seconds(20)) {
                self.presented().contains { $0.contains(marker) }
            }
            let line = self.presented().first { $0.contains(marker) }!
            #expect(line == "\(Self.app) r1 \(marker) count=1 late=0")
            let delivered = try Self.delivered(client)
            #expect(delivered.count == 1)
            #expect(delivered.first?["id"] == "r1" && delivered.first?["late"] == false && delivered.first?["count"] == 1)
            #expect(try appInfo(client, Self.app)["badge"] == 3)
            #expect(try client.call("io.coalesced.Notifications.ListPending", ["app": .string(Self.app)])["pending"] == [])
            // The journal's entry, here on stderr, names the app and the notification.
            try waitUntil("the daemon's log to show the presentation") {
                daemon.output.contains("Notification: \(marker)") && daemon.output.contains("notification=r1")
            }
            // Removing the delivered entry and clearing the badge.
            #expect(try client.call("io.coalesced.Notifications.RemoveDelivered", ["app": .string(Self.app), "all": true])["removed"] == 1)
            _ = try client.call("io.coalesced.Notifications.SetBadge", ["app": .string(Self.app), "badge": 0])
            #expect(try Self.delivered(client).isEmpty)
            #expect(try appInfo(client, Self.app)["badge"] == 0)
        }
        daemon.signal(SIGKILL)
    }

    @Test func anActiveAppReceivesWillPresentAndAnAlertInterruptsItUntilAnswered() async throws {
        let marker = "active-\(UUID().uuidString.prefix(8))"
        let daemon = try await onThread { try self.daemon() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            let stream = try attachedFromThisProcess(daemon.socketPath, app: Self.app)
            func next() throws -> JSONValue { try stream.receiveReply().parameters["callback"] ?? .null }
            _ = try Self.schedule(client, ["id": "now", "content": ["title": .string(marker)]])
            let event = try next()
            #expect(event["kind"] == "notification.willPresent")
            #expect(event["payload"]?["id"] == "now" && event["payload"]?["content"]?["title"] == .string(marker))
            _ = try client.call("io.coalesced.App.Ack", ["app": .string(Self.app), "seq": event["seq"] ?? .null])
            // A banner over the active app goes to it alone: the command is not run for it.
            #expect(!self.presented().contains { $0.contains(marker) })

            // An alert interrupts the app on screen until it is answered.
            _ = try Self.schedule(client, ["id": "alarm", "style": "alert", "content": ["title": .string(marker + "-alarm")]])
            var kinds: [String] = []
            while kinds.count < 2 {
                let callback = try next()
                kinds.append(callback["kind"]?.stringValue ?? "?")
                _ = try client.call("io.coalesced.App.Ack", ["app": .string(Self.app), "seq": callback["seq"] ?? .null])
            }
            #expect(Set(kinds) == ["notification.willPresent", "lifecycle.willResignActive"])
            try waitForApp(client, Self.app, "state", "inactive")
            try waitUntil("the command to show the alert") { self.presented().contains { $0.contains(marker + "-alarm") } }
            _ = try client.call("io.coalesced.Notifications.Respond", ["app": .string(Self.app), "id": "alarm", "action": "default"])
            var after: [String] = []
            while !after.contains("lifecycle.didBecomeActive") {
                let callback = try next()
                after.append(callback["kind"]?.stringValue ?? "?")
                _ = try client.call("io.coalesced.App.Ack", ["app": .string(Self.app), "seq": callback["seq"] ?? .null])
            }
            #expect(Set(after) == ["notification.didReceiveResponse", "lifecycle.didBecomeActive"])
            try waitForApp(client, Self.app, "state", "active")

            // An alert taken off the delivered list unanswered no longer interrupts the app.
            _ = try Self.schedule(client, ["id": "alarm2", "style": "alert", "content": ["title": .string(marker + "-alarm2")]])
            var second: [String] = []
            while !second.contains("lifecycle.willResignActive") || !second.contains("notification.willPresent") {
                let callback = try next()
                second.append(callback["kind"]?.stringValue ?? "?")
                _ = try client.call("io.coalesced.App.Ack", ["app": .string(Self.app), "seq": callback["seq"] ?? .null])
            }
            try waitForApp(client, Self.app, "state", "inactive")
            _ = try client.call("io.coalesced.Notifications.RemoveDelivered", ["app": .string(Self.app), "ids": ["alarm2"]])
            let back = try next()
            #expect(back["kind"] == "lifecycle.didBecomeActive")
            _ = try client.call("io.coalesced.App.Ack", ["app": .string(Self.app), "seq": back["seq"] ?? .null])
            try waitForApp(client, Self.app, "state", "active")
        }
        daemon.signal(SIGKILL)
    }

    /// An alert pushed off the delivered list by newer notifications (past MaxDelivered=) can no longer be answered:
    /// it stops interrupting the app, as one removed with RemoveDelivered does.
    @Test func anAlertDroppedFromTheDeliveredListForRoomEndsItsInterruption() async throws {
        let daemon = try await onThread { try self.daemon(extra: "MaxDelivered=1") }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            let stream = try attachedFromThisProcess(daemon.socketPath, app: Self.app)
            var kinds: [String] = []
            func read(until kind: String) throws {
                while !kinds.contains(kind) {
                    let callback = try stream.receiveReply().parameters["callback"] ?? .null
                    kinds.append(callback["kind"]?.stringValue ?? "?")
                    _ = try client.call("io.coalesced.App.Ack", ["app": .string(Self.app), "seq": callback["seq"] ?? .null])
                }
            }
            _ = try Self.schedule(client, ["id": "alarm", "style": "alert", "content": ["title": "alarm"]])
            try read(until: "lifecycle.willResignActive")
            try waitForApp(client, Self.app, "state", "inactive")
            // A banner while the app is interrupted goes to the desktop, and takes the alarm's place in the list.
            _ = try Self.schedule(client, ["id": "news", "content": ["title": "news"]])
            try waitForApp(client, Self.app, "state", "active")
            try read(until: "lifecycle.didBecomeActive")
            #expect(try Self.delivered(client).map { $0["id"] } == ["news"])
        }
        daemon.signal(SIGKILL)
    }

    @Test func requestsSurviveKillMinusNineAndMissedFiresArePresentedOnceLateCoalescedByThread() async throws {
        let marker = "missed-\(UUID().uuidString.prefix(8))"
        let first = try await onThread { try self.daemon(extra: "LateAfterSec=1") }
        // Far enough ahead that the requests are scheduled and the daemon killed before they come due, on a machine
        // loaded by a whole test run (five Schedules took over eight seconds there).
        let due = Self.now() + 20
        try await onThread {
            let client = try testClient(first.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
            for index in 1...3 {
                _ = try Self.schedule(
                    client,
                    [
                        "id": .string("m\(index)"), "trigger": ["at": .double(due + Double(index) * 0.1)],
                        "content": ["title": .string("\(marker)-\(index)"), "threadId": "inbox"],
                    ]
                )
            }
            _ = try Self.schedule(
                client, ["id": "dropped", "trigger": ["at": .double(due)], "late": "dropAfter", "dropAfterSec": 1, "content": ["title": "x"]]
            )
            _ = try Self.schedule(
                client,
                ["id": "later", "trigger": ["calendar": ["month": 1, "day": 1, "hour": 9], "repeats": true], "content": ["title": "New year"]]
            )
        }
        // Killed with all of them pending; they come due while no daemon runs.
        #expect(Self.now() < due, "scheduled before they came due")
        first.signal(SIGKILL)
        _ = try await onThread { first.waitForExit() }
        try await onThread { try waitUntil("the requests to be missed", timeout: .seconds(40)) { Self.now() > due + 3 } }
        let second = try await onThread { () throws -> DaemonProcess in
            let daemon = try first.restarted(configuration: self.configuration(extra: "LateAfterSec=1"))
            try daemon.waitUntilReady()
            return daemon
        }
        try await onThread {
            let client = try testClient(second.socketPath)
            let pending = try client.call("io.coalesced.Notifications.ListPending", ["app": .string(Self.app)])["pending"]?.arrayValue ?? []
            #expect(pending.map { $0["request"]?["id"] } == ["later"], "the repeating request remains")
            #expect(pending.first?["calendar"] == "*-01-01 09:00:00")
            let delivered = try Self.delivered(client)
            #expect(delivered.count == 1, "three missed fires of one thread are one presentation: \(delivered)")
            #expect(delivered.first?["count"] == 3 && delivered.first?["late"] == true && delivered.first?["id"] == "m3")
            try waitUntil("the command to show the coalesced presentation") {
                self.presented().contains("\(Self.app) m3 \(marker)-3 count=3 late=1")
            }
            #expect(second.output.contains("dropped"), "the journal says the dropAfter fire was dropped")
            #expect(second.output.contains("were missed while the daemon was down"))
        }
        // Started once more: nothing is presented again.
        let third = try await onThread { () throws -> DaemonProcess in
            let daemon = try second.restarted(configuration: self.configuration(extra: "LateAfterSec=1"))
            try daemon.waitUntilReady()
            return daemon
        }
        try await onThread {
            let client = try testClient(third.socketPath)
            #expect(try Self.delivered(client).count == 1)
            #expect(self.presented().filter { $0.contains(marker) }.count == 1)
        }
        third.signal(SIGKILL)
    }

    @Test func theSixtyFifthRequestIsRefusedWithTheLimitAndAnIdReplacesItsRequest() async throws {
        let daemon = try await onThread { try self.daemon() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
            for index in 1...64 {
                _ = try Self.schedule(client, ["id": .string("r\(index)"), "trigger": ["calendar": ["hour": 8]], "content": ["title": "t"]])
            }
            #expect(throws: VarlinkError(name: "io.coalesced.Notifications.PendingLimit", parameters: ["app": .string(Self.app), "limit": 64, "pending": 64])) {
                try Self.schedule(client, ["id": "r65", "content": ["title": "t"]])
            }
            // The same id replaces its request whole, within the limit.
            _ = try Self.schedule(client, ["id": "r1", "trigger": ["calendar": ["hour": 9]], "content": ["title": "replaced"]])
            let pending = try client.call("io.coalesced.Notifications.ListPending", ["app": .string(Self.app)])["pending"]?.arrayValue ?? []
            #expect(pending.count == 64)
            #expect(pending.first { $0["request"]?["id"] == "r1" }?["request"]?["content"]?["title"] == "replaced")
            #expect(try client.call("io.coalesced.Notifications.Cancel", ["app": .string(Self.app), "all": true])["cancelled"] == 64)
        }
        daemon.signal(SIGKILL)
    }

    @Test func badRequestsAreRefusedWithTheReason() async throws {
        let daemon = try await onThread { try self.daemon() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
            func reason(_ request: JSONObject) -> String? {
                do {
                    _ = try Self.schedule(client, request)
                    return nil
                } catch let error as VarlinkError {
                    return error.varlinkName == "io.coalesced.Notifications.InvalidRequest" ? error.varlinkParameters["reason"]?.stringValue : error.varlinkName
                } catch {
                    return "\(error)"
                }
            }
            #expect(reason(["id": "a", "trigger": ["after": 30, "repeats": true], "content": ["title": "t"]])?.contains("at least 60 seconds") == true)
            #expect(reason(["id": "a", "trigger": ["calendar": ["month": 2, "day": 30]], "content": ["title": "t"]])?.contains("matches no date") == true)
            #expect(reason(["id": "a", "trigger": ["calendar": ["hour": 8, "timeZone": "Mars/Olympus"]], "content": ["title": "t"]])?.contains("Mars/Olympus") == true)
            #expect(reason(["id": "a", "trigger": ["at": 1, "after": 2], "content": ["title": "t"]])?.contains("one of at, after and calendar") == true)
            #expect(reason(["id": "a", "style": "loud", "content": ["title": "t"]])?.contains("banner or alert") == true)
            #expect(reason(["id": "", "content": ["title": "t"]])?.contains("non-empty id") == true)
            #expect(
                reason(["id": "big", "content": ["title": "t", "body": .string(String(repeating: "x", count: 5000))]])?
                    .contains("more than the 4096 of [Notifications] MaxContentSize=") == true
            )
            #expect(throws: VarlinkError(name: "io.coalesced.Notifications.UnknownApp", parameters: ["app": "org.example.none"])) {
                try Self.schedule(client, ["id": "a", "content": ["title": "t"]], app: "org.example.none")
            }
            #expect(throws: VarlinkError(name: "io.coalesced.Notifications.UnknownNotification", parameters: ["app": .string(Self.app), "id": "nope"])) {
                try client.call("io.coalesced.Notifications.Respond", ["app": .string(Self.app), "id": "nope", "action": "default"])
            }
        }
        daemon.signal(SIGKILL)
    }

    @Test func anotherUserMayNotActForTheApp() async throws {
        let daemon = try await onThread { try self.daemon() }
        let copy = try await onThread { try executableCopy(of: "coalescectl", in: daemon.directory) }
        let socket = daemon.socketPath
        try await onThread {
            let client = try testClient(socket)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
        }
        let refused = try await onThread {
            try runProcess(
                "/usr/bin/setpriv",
                ["--reuid=nobody", "--regid=nogroup", "--clear-groups", copy, "--socket", socket, "notify", "schedule", Self.app, "x", "--title", "t"]
            )
        }
        #expect(refused.status == 1)
        #expect(refused.stderr.contains(#"io.coalesced.Notifications.NotAllowed {"app":"\#(Self.app)"}"#), "\(refused.stderr)")
        daemon.signal(SIGKILL)
    }

    @Test func aResponseLaunchesAStoppedAppAndWaitsForASuspendedOne() async throws {
        let daemon = try await onThread { try self.daemon() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
            _ = try Self.schedule(
                client,
                ["id": "n", "content": ["title": "t", "userInfo": ["note": 7], "actions": [["id": "snooze", "title": "Snooze"]]]]
            )
            try waitUntil("the notification to be delivered") { try Self.delivered(client).count == 1 }
            #expect(throws: VarlinkError(name: "io.coalesced.Notifications.UnknownAction", parameters: ["app": .string(Self.app), "id": "n", "action": "open"])) {
                try client.call("io.coalesced.Notifications.Respond", ["app": .string(Self.app), "id": "n", "action": "open"])
            }
            // The app is not running: the default action launches it into the foreground, and the response follows
            // its launch.
            _ = try client.call("io.coalesced.Notifications.Respond", ["app": .string(Self.app), "id": "n", "action": "default", "text": "hi"])
            let app = try ExampleApp(socket: daemon.socketPath, name: Self.app)
            #expect(try app.nextCallbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            let response = try app.waitForLine("notification didReceiveResponse")
            #expect(response == #"notification didReceiveResponse id=n action=default text=hi userInfo={"note":7}"#)

            // Answered, it is no longer listed, and is not answered again.
            #expect(try Self.delivered(client).isEmpty)
            #expect(throws: VarlinkError(name: "io.coalesced.Notifications.UnknownNotification", parameters: ["app": .string(Self.app), "id": "n"])) {
                try client.call("io.coalesced.Notifications.Respond", ["app": .string(Self.app), "id": "n", "action": "snooze"])
            }

            // Suspended: an action that runs in the background wakes it into the background for the response, with no
            // callback; once it has acknowledged the response it is suspended again.
            _ = try client.call("io.coalesced.System.Deactivate")
            #expect(try app.nextCallbacks(2) == ["willResignActive", "didEnterBackground"])
            try waitForApp(client, Self.app, "state", "suspended")
            _ = try Self.schedule(
                client,
                ["id": "m", "content": ["title": "t", "userInfo": ["note": 8], "actions": [["id": "snooze", "title": "Snooze"]]]]
            )
            try waitUntil("the second notification to be delivered") { try Self.delivered(client).count == 1 }
            _ = try client.call("io.coalesced.Notifications.Respond", ["app": .string(Self.app), "id": "m", "action": "snooze"])
            try waitUntil("the response to reach the app woken for it") {
                app.output.contains { $0 == #"notification didReceiveResponse id=m action=snooze text=- userInfo={"note":8}"# }
            }
            #expect(!app.output.contains { $0.hasPrefix("callback willEnterForeground") }, "woken into the background only")
            try waitForApp(client, Self.app, "state", "suspended")
        }
        daemon.signal(SIGKILL)
    }

    @Test func coalescectlSchedulesOnACalendarEventListsAndAnswers() async throws {
        let daemon = try await onThread { try self.daemon() }
        let socket = daemon.socketPath
        func ctl(_ arguments: [String]) async throws -> Run {
            try await onThread { try runProcess(BuildProducts.path(of: "coalescectl"), ["--socket", socket] + arguments) }
        }
        try await onThread {
            _ = try testClient(socket).call("io.coalesced.App.Register", ["name": .string(Self.app)])
        }
        let scheduled = try await ctl(["notify", "schedule", Self.app, "standup", "--on", "Mon *-*-* 09:30", "--repeat", "--title", "Standup"])
        #expect(scheduled.status == 0 && scheduled.stdout.hasPrefix("next: "), "\(scheduled.stderr)")
        let zoned = try await ctl(["notify", "schedule", Self.app, "rent", "--on", "*-*-01 09:00 Europe/Berlin", "--repeat", "--title", "Rent"])
        #expect(zoned.status == 0, "\(zoned.stderr)")
        let pending = try await ctl(["notify", "pending", Self.app, "--no-legend"])
        #expect(pending.stdout.contains("Mon *-*-* 09:30:00, repeats"), "\(pending.stdout)")
        #expect(pending.stdout.contains("*-*-01 09:00:00 Europe/Berlin, repeats"), "\(pending.stdout)")
        // Ranges and lists are not a notification's components: refused with what the option takes.
        let range = try await ctl(["notify", "schedule", Self.app, "x", "--on", "Mon..Fri 09:00", "--title", "t"])
        #expect(range.status == 64 && range.stderr.contains("expected [WEEKDAY]"), "\(range.stderr)")
        let now = try await ctl(["notify", "schedule", Self.app, "now", "--title", "Now", "--badge", "5", "--action", "snooze:Snooze"])
        #expect(now.status == 0, "\(now.stderr)")
        try await onThread {
            try waitUntil("the notification to be delivered") { try Self.delivered(testClient(socket)).count == 1 }
        }
        let delivered = try await ctl(["notify", "delivered", Self.app])
        #expect(delivered.stdout.contains(" now ") && delivered.stdout.contains("1 delivered notification."), "\(delivered.stdout)")
        #expect(try await ctl(["notify", "badge", Self.app]).stdout == "badge: 5\n")
        let unknown = try await ctl(["notify", "respond", Self.app, "now", "open"])
        #expect(unknown.status == 1 && unknown.stderr.contains("io.coalesced.Notifications.UnknownAction"), "\(unknown.stderr)")
        #expect(try await ctl(["notify", "respond", Self.app, "now", "snooze"]).stdout == "answered\n")
        let again = try await ctl(["notify", "respond", Self.app, "now", "snooze"])
        #expect(again.status == 1 && again.stderr.contains("io.coalesced.Notifications.UnknownNotification"), "\(again.stderr)")
        #expect(try await ctl(["notify", "cancel", Self.app, "--all"]).stdout == "cancelled: 2\n")
        daemon.signal(SIGKILL)
    }

    @Test func notificationsCountAgainstTheOwnersHeldBytesQuotaWithItsEvents() async throws {
        let daemon = try await onThread { try self.daemon(extra: "[Quotas]\nAdminHeldBytes=8K\n") }
        let body = String(repeating: "b", count: 1000)
        @Sendable func held(_ client: VarlinkClient) throws -> Int64 {
            try client.call("io.coalesced.System.Stats")["stats"]?["quotas"]?["caller"]?["heldBytes"]?.intValue ?? -1
        }
        let second = try await onThread { () throws -> DaemonProcess in
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
            var scheduled = 0
            var refusal: VarlinkError?
            while refusal == nil, scheduled < 20 {
                do {
                    _ = try Self.schedule(
                        client, ["id": .string("r\(scheduled)"), "trigger": ["calendar": ["hour": 8]], "content": ["title": "t", "body": .string(body)]]
                    )
                    scheduled += 1
                } catch let error as VarlinkError {
                    refusal = error
                }
            }
            // Root's apps have the administrators' quota: 8 KiB hold a handful of 1 KB requests, not twenty.
            #expect(scheduled >= 3 && scheduled < 8, "\(scheduled) scheduled")
            #expect(refusal == VarlinkError(name: "io.coalesced.Notifications.QuotaExceeded", parameters: ["quota": "AdminHeldBytes", "limit": 8192, "uid": 0]))
            let charged = try held(client)
            #expect(charged > Int64(scheduled * 1000) && charged <= 8192, "\(charged) bytes held")
            // The same quota as the app's events: a post past it is refused.
            #expect(throws: VarlinkError.self) {
                try client.call("io.coalesced.App.Post", ["target": .string(Self.app), "kind": "big", "payload": ["text": .string(String(repeating: "p", count: 4000))]])
            }
            // A restart charges what the store holds again.
            let restarted = try daemon.restartedWhenReady(configuration: self.configuration(extra: "[Quotas]\nAdminHeldBytes=8K\n"))
            #expect(try held(testClient(restarted.socketPath)) == charged)
            return restarted
        }
        try await onThread {
            let client = try testClient(second.socketPath)
            #expect(try client.call("io.coalesced.Notifications.Cancel", ["app": .string(Self.app), "all": true])["cancelled"] != 0)
            #expect(try held(client) == 0, "cancelled requests are uncharged")
            _ = try Self.schedule(client, ["id": "again", "content": ["title": "t", "body": .string(body)]])
            try waitUntil("the notification to be delivered") { try Self.delivered(client).count == 1 }
            #expect(try held(client) > 1000, "a delivered entry is charged")
            _ = try client.call("io.coalesced.Notifications.RemoveDelivered", ["app": .string(Self.app), "all": true])
            #expect(try held(client) == 0)
        }
        second.signal(SIGKILL)
    }
}
