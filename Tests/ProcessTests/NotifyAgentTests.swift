import CoalesceTestSupport
import Foundation
import Systemd
import Testing
import Varlink

/// What the desktop's notification server tells a ``DesktopNotifications``, collected as it comes.
final class DesktopEvents {
    var all: [DesktopNotifications.Event] = []

    /// Runs `desktop` until `found` returns a value for the events so far, for at most `timeout`.
    func wait<T>(
        _ desktop: DesktopNotifications,
        for what: String,
        timeout: Duration = .seconds(20),
        _ found: ([DesktopNotifications.Event]) -> T?
    ) throws -> T {
        // The pause reads the bus: it ends as soon as a signal has come.
        try waitUntil(
            "\(what) (came: \(self.all))",
            timeout: timeout,
            pausingWith: { _ in try desktop.wait(.milliseconds(100)) }
        ) { found(self.all) }
    }
}

/// The freedesktop notification client over sd-bus, against python-dbusmock's notification server on a private
/// session bus.
@Suite struct DesktopNotificationsTests {
    @Test func capabilitiesAreTheServersOwnList() async throws {
        try await onThread {
            let bus = try SessionBus()
            let mock = try NotificationServerMock(on: bus)
            let desktop = try DesktopNotifications(address: bus.address) { _ in }
            // The template's default list has no actions; a server given some lists them.
            let plain = try desktop.capabilities()
            #expect(plain == [
                "body", "body-markup", "icon-static", "image/svg+xml", "private-synchronous", "append",
                "private-icon-only", "truncation",
            ])
            #expect(!plain.contains("actions"))
            try mock.stop()
            let withActions = try NotificationServerMock(on: bus, capabilities: ["actions", "body", "persistence"])
            #expect(try desktop.capabilities() == ["actions", "body", "persistence"])
            _ = withActions
        }
    }

    @Test func notifyReturnsTheServersIdAndSendsEverything() async throws {
        try await onThread {
            let bus = try SessionBus()
            let mock = try NotificationServerMock(on: bus, capabilities: ["actions", "body"])
            let desktop = try DesktopNotifications(address: bus.address) { _ in }
            let first = try desktop.notify(
                appName: "org.example.mail",
                summary: "New mail",
                body: "From Ann\nLunch?",
                actions: [("default", "Open"), ("reply", "Reply")],
                hints: ["urgency": .byte(2), "x-coalesced-app": .string("org.example.mail"), "suppress-sound": .boolean(true)]
            )
            #expect(first > 0)
            let second = try desktop.notify(appName: "org.example.mail", summary: "More mail", body: "")
            #expect(second != first)
            #expect(try desktop.notify(appName: "org.example.mail", replacesID: first, summary: "Again", body: "") == first)
            let calls = mock.notifyCalls
            #expect(calls.count == 3)
            #expect(calls.first?.contains(
                #"Notify "org.example.mail" 0 "" "New mail" "From Ann\#nLunch?" ["default", "Open", "reply", "Reply"] "#
                    + #"{"suppress-sound": True, "urgency": 2, "x-coalesced-app": "org.example.mail"} -1"#
            ) == true, "\(calls)")
            #expect(calls.last?.contains(#"Notify "org.example.mail" \#(first) "" "Again""#) == true, "\(calls)")
        }
    }

    @Test func signalsOfTheServerReachTheCallbackAndForgedOnesDoNot() async throws {
        try await onThread {
            let bus = try SessionBus()
            let mock = try NotificationServerMock(on: bus, capabilities: ["actions", "body"])
            let events = DesktopEvents()
            let desktop = try DesktopNotifications(address: bus.address) { events.all.append($0) }
            #expect(desktop.serverOwner?.hasPrefix(":") == true)
            let id = try desktop.notify(appName: "org.example.mail", summary: "New mail", body: "")

            // Anyone on the bus can send the signal; only the name's owner is believed.
            try bus.gdbus([
                "emit", "-o", "/org/freedesktop/Notifications", "-s", "org.freedesktop.Notifications.ActionInvoked",
                "\(id)", "forged",
            ])
            try mock.emit("ActionInvoked", signature: "us", ["<uint32 \(id)>", "<'default'>"])
            try events.wait(desktop, for: "ActionInvoked") { $0.contains(.actionInvoked(id: id, key: "default")) ? () : nil }
            #expect(!events.all.contains(.actionInvoked(id: id, key: "forged")))

            try mock.emit("NotificationClosed", signature: "uu", ["<uint32 \(id)>", "<uint32 2>"])
            try events.wait(desktop, for: "NotificationClosed") {
                $0.contains(.closed(id: id, reason: .dismissed)) ? () : nil
            }
        }
    }

    @Test func theServerComingAndGoingIsSeen() async throws {
        try await onThread {
            let bus = try SessionBus()
            let mock = try NotificationServerMock(on: bus)
            let events = DesktopEvents()
            let desktop = try DesktopNotifications(address: bus.address) { events.all.append($0) }
            let firstOwner = try #require(desktop.serverOwner)
            try mock.stop()
            try events.wait(desktop, for: "the server to vanish") { $0.contains(.serverVanished) ? () : nil }
            #expect(desktop.serverOwner == nil)
            let next = try NotificationServerMock(on: bus)
            let owner = try events.wait(desktop, for: "a server to appear") { events -> String? in
                for case .serverAppeared(let owner) in events { return owner }
                return nil
            }
            #expect(owner != firstOwner)
            #expect(desktop.serverOwner == owner)
            _ = next
        }
    }

    @Test func withoutAServerNotifyFailsAtOnceSayingSo() async throws {
        try await onThread {
            let bus = try SessionBus()
            let desktop = try DesktopNotifications(address: bus.address, callTimeout: .seconds(2)) { _ in }
            #expect(desktop.serverOwner == nil)
            let start = ContinuousClock.now
            do {
                _ = try desktop.notify(appName: "org.example.mail", summary: "New mail", body: "")
                Issue.record("Notify succeeded with no server on the bus")
            } catch {
                #expect("\(error)".contains("no notification server runs on the session bus"), "\(error)")
                #expect("\(error)".contains("org.freedesktop.DBus.Error.ServiceUnknown"), "\(error)")
            }
            #expect(ContinuousClock.now - start < .seconds(2))
        }
    }

    @Test func aStuckServerCostsTheCallTimeoutAndNoMore() async throws {
        try await onThread {
            let bus = try SessionBus()
            let mock = try NotificationServerMock(on: bus)
            try mock.replaceMethod("Notify", signature: "susssasa{sv}i", returns: "u", code: "time.sleep(10); ret = 1")
            let desktop = try DesktopNotifications(address: bus.address, callTimeout: .milliseconds(500)) { _ in }
            let start = ContinuousClock.now
            do {
                _ = try desktop.notify(appName: "org.example.mail", summary: "New mail", body: "")
                Issue.record("Notify succeeded although the server sleeps")
            } catch {
                #expect("\(error)".contains("the notification server did not answer within 500 ms"), "\(error)")
            }
            let elapsed = ContinuousClock.now - start
            #expect(elapsed >= .milliseconds(450) && elapsed < .seconds(3), "\(elapsed)")
        }
    }

    @Test func anUnreachableBusIsAnErrorThatNamesIt() async throws {
        let directory = try TemporaryDirectory()
        let address = "unix:path=\(directory.file("no-bus"))"
        #expect {
            _ = try DesktopNotifications(address: address) { _ in }
        } throws: { error in
            "\(error)".contains("connect to the session bus at \(address)")
        }
    }
}

/// coalesce-notify-agent between a stand-in for the daemon's io.coalesced.Notifications (its stream and Respond)
/// and python-dbusmock's notification server on a private session bus.
@Suite struct NotifyAgentTests {
    /// The agent binary against `daemon`'s socket and `bus`.
    static func agent(_ daemon: FakePresentationsDaemon, _ bus: SessionBus, _ arguments: [String] = []) throws -> WatchedProcess {
        try WatchedProcess(
            BuildProducts.path(of: "coalesce-notify-agent"),
            ["--socket", daemon.path] + arguments,
            environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address]
        )
    }

    @Test func aPresentationIsShownAndTheUsersAnswersGoBack() async throws {
        try await onThread {
            let bus = try SessionBus()
            let mock = try NotificationServerMock(on: bus, capabilities: ["actions", "body"])
            let daemon = try FakePresentationsDaemon(path: bus.directory.file("io.coalesced"))
            let agent = try Self.agent(daemon, bus)
            try agent.waitForLine(containing: "listening for presentations")

            daemon.present(presentation(
                id: "lunch", title: "Lunch?", subtitle: "From Ann", body: "At noon", actions: [("reply", "Reply")],
                style: "alert"
            ))
            let call = try waitUntil("the Notify of the presentation") { mock.notifyCalls.first }
            #expect(call.contains(
                #"Notify "org.example.mail" 0 "" "Lunch?" "From Ann\#nAt noon" ["default", "Open", "reply", "Reply"] "#
                    + #"{"suppress-sound": True, "urgency": 2, "x-coalesced-app": "org.example.mail", "#
                    + #""x-coalesced-id": "lunch"} -1"#
            ), "\(call)")

            // The mock numbers notifications from 1.
            try mock.emit("ActionInvoked", signature: "us", ["<uint32 1>", "<'default'>"])
            try waitUntil("the Respond of the click") { daemon.responded.count == 1 }
            #expect(daemon.responded[0] == ["app": "org.example.mail", "id": "lunch", "action": "default"])
            // Closed after it was answered: no dismissal.
            try mock.emit("NotificationClosed", signature: "uu", ["<uint32 1>", "<uint32 2>"])

            daemon.present(presentation(id: "call", title: "Call Bob"))
            try waitUntil("the second Notify") { mock.notifyCalls.count == 2 }
            #expect(mock.notifyCalls[1].contains(#""urgency": 1"#), "\(mock.notifyCalls[1])")
            try mock.emit("NotificationClosed", signature: "uu", ["<uint32 2>", "<uint32 2>"])
            try waitUntil("the Respond of the dismissal") { daemon.responded.count == 2 }
            #expect(daemon.responded[1] == ["app": "org.example.mail", "id": "call", "action": "dismiss"])

            daemon.present(presentation(id: "later", title: "Later", actions: [("reply", "Reply")]))
            try waitUntil("the third Notify") { mock.notifyCalls.count == 3 }
            try mock.emit("ActionInvoked", signature: "us", ["<uint32 3>", "<'reply'>"])
            try waitUntil("the Respond of the button") { daemon.responded.count == 3 }
            #expect(daemon.responded[2] == ["app": "org.example.mail", "id": "later", "action": "reply"])

            // An id the agent did not show, and a notification that expired: nothing to answer. The signals come in
            // order on one connection, so the answer to the last click shows that none went back before it.
            try mock.emit("ActionInvoked", signature: "us", ["<uint32 77>", "<'default'>"])
            daemon.present(presentation(id: "expiring", title: "Expiring"))
            try waitUntil("the fourth Notify") { mock.notifyCalls.count == 4 }
            try mock.emit("NotificationClosed", signature: "uu", ["<uint32 4>", "<uint32 1>"])
            daemon.present(presentation(id: "probe", title: "Probe"))
            try waitUntil("the fifth Notify") { mock.notifyCalls.count == 5 }
            try mock.emit("ActionInvoked", signature: "us", ["<uint32 5>", "<'default'>"])
            try waitUntil("the Respond of the last click") { daemon.responded.count >= 4 }
            #expect(daemon.responded.count == 4)
            #expect(daemon.responded.last?["id"] == "probe")

            agent.child.signal(SIGTERM)
            #expect(agent.child.wait(timeout: .seconds(10)) == 0)
        }
    }

    @Test func withoutActionsOnTheServerNoneAreOffered() async throws {
        try await onThread {
            let bus = try SessionBus()
            let mock = try NotificationServerMock(on: bus)  // the template's list: no actions
            let daemon = try FakePresentationsDaemon(path: bus.directory.file("io.coalesced"))
            let agent = try Self.agent(daemon, bus)
            try agent.waitForLine(containing: "listening for presentations")
            daemon.present(presentation(id: "lunch", title: "Lunch?", actions: [("reply", "Reply")]))
            let call = try waitUntil("the Notify") { mock.notifyCalls.first }
            #expect(call.contains(#""Lunch?" "" [] {"#), "\(call)")
        }
    }

    @Test func aThreadReplacesItsLastNotificationWhereTheServerKeepsNoHistory() async throws {
        try await onThread {
            let bus = try SessionBus()
            let mock = try NotificationServerMock(on: bus, capabilities: ["actions", "body"])
            let daemon = try FakePresentationsDaemon(path: bus.directory.file("io.coalesced"))
            let agent = try Self.agent(daemon, bus)
            try agent.waitForLine(containing: "listening for presentations")
            daemon.present(presentation(id: "m1", title: "One", threadId: "ann"))
            try waitUntil("the first Notify") { mock.notifyCalls.count == 1 }
            daemon.present(presentation(id: "m2", title: "Two", threadId: "ann"))
            daemon.present(presentation(id: "m3", title: "Three", threadId: "bob"))
            try waitUntil("three Notify calls") { mock.notifyCalls.count == 3 }
            let calls = mock.notifyCalls
            #expect(calls[1].contains(#"Notify "org.example.mail" 1 "" "Two""#), "\(calls)")
            #expect(calls[2].contains(#"Notify "org.example.mail" 0 "" "Three""#), "\(calls)")
            // The replaced notification answers for the latest request of its thread.
            try mock.emit("ActionInvoked", signature: "us", ["<uint32 1>", "<'default'>"])
            try waitUntil("the Respond") { daemon.responded.count == 1 }
            #expect(daemon.responded[0]["id"] == "m2")
        }
    }

    @Test func presentationsWaitForAServerAndGoOutWhenOneAppears() async throws {
        try await onThread {
            let bus = try SessionBus()
            let daemon = try FakePresentationsDaemon(path: bus.directory.file("io.coalesced"))
            let agent = try Self.agent(daemon, bus)
            try agent.waitForLine(containing: "listening for presentations")
            daemon.present(presentation(id: "m1", title: "One"))
            daemon.present(presentation(id: "m2", title: "Two"))
            // The Notify that found no server, not the line at start-up.
            try agent.waitForLine(containing: "presentation(s) wait")
            let mock = try NotificationServerMock(on: bus, capabilities: ["actions", "body"])
            try waitUntil("both waiting presentations shown") { mock.notifyCalls.count == 2 }
            #expect(mock.notifyCalls[0].contains(#""One""#) && mock.notifyCalls[1].contains(#""Two""#), "\(mock.notifyCalls)")
            // One line for the missing server, not one per try.
            #expect(agent.output.filter { $0.contains("no notification server runs") }.count <= 2, "\(agent.output)")
        }
    }

    @Test func aPresentationAheadOfTheStreamsFirstReplyIsShown() async throws {
        try await onThread {
            let bus = try SessionBus()
            let mock = try NotificationServerMock(on: bus, capabilities: ["body"])
            let daemon = try FakePresentationsDaemon(path: bus.directory.file("io.coalesced"))
            daemon.presentAheadOfTheFirstReply(presentation(id: "early", title: "Early"))
            let agent = try Self.agent(daemon, bus)
            let call = try waitUntil("the Notify of the early presentation") { mock.notifyCalls.first }
            #expect(call.contains(#""Early""#), "\(call)")
            _ = agent
        }
    }

    @Test func aPresentationThatComesInOneReadWithTheFirstReplyIsShown() async throws {
        try await onThread {
            let bus = try SessionBus()
            let mock = try NotificationServerMock(on: bus, capabilities: ["actions", "body"])
            let daemon = try FakePresentationsDaemon(path: bus.directory.file("io.coalesced"))
            daemon.presentWithTheFirstReply(presentation(id: "behind", title: "Right behind"))
            let agent = try Self.agent(daemon, bus)
            let call = try waitUntil("the Notify of the presentation behind the first reply") { mock.notifyCalls.first }
            #expect(call.contains(#""Right behind""#), "\(call)")
            _ = agent
        }
    }

    @Test func theQueueKeepsTheNewestWhenItIsFull() async throws {
        try await onThread {
            let bus = try SessionBus()
            let daemon = try FakePresentationsDaemon(path: bus.directory.file("io.coalesced"))
            let agent = try Self.agent(daemon, bus)
            try agent.waitForLine(containing: "listening for presentations")
            for index in 1...70 { daemon.present(presentation(id: "m\(index)", title: "Number \(index)")) }
            try agent.waitForLine(containing: "dropped the oldest, org.example.mail m6")
            let mock = try NotificationServerMock(on: bus, capabilities: ["body"])
            try waitUntil("the 64 kept shown") { mock.notifyCalls.count == 64 }
            #expect(mock.notifyCalls.first?.contains(#""Number 7""#) == true, "\(mock.notifyCalls.first ?? "")")
            #expect(mock.notifyCalls.last?.contains(#""Number 70""#) == true, "\(mock.notifyCalls.last ?? "")")
        }
    }

    @Test func theAgentEndsWhenTheSessionBusDoes() async throws {
        try await onThread {
            let bus = try SessionBus()
            let daemon = try FakePresentationsDaemon(path: bus.directory.file("io.coalesced"))
            let agent = try Self.agent(daemon, bus)
            try agent.waitForLine(containing: "listening for presentations")
            bus.stop()
            #expect(agent.child.wait(timeout: .seconds(10)) == 1)
            try agent.waitForLine(containing: "lost the session bus")
        }
    }

    @Test func aStuckServerDoesNotHoldUpTheAnswers() async throws {
        try await onThread {
            let bus = try SessionBus()
            let mock = try NotificationServerMock(on: bus, capabilities: ["actions", "body"])
            let daemon = try FakePresentationsDaemon(path: bus.directory.file("io.coalesced"))
            let agent = try Self.agent(daemon, bus, ["--call-timeout", "0.5"])
            try agent.waitForLine(containing: "listening for presentations")
            daemon.present(presentation(id: "m1", title: "One"))
            try waitUntil("the first Notify") { mock.notifyCalls.count == 1 }
            try mock.replaceMethod("Notify", signature: "susssasa{sv}i", returns: "u", code: "time.sleep(3); ret = 99")
            daemon.present(presentation(id: "m2", title: "Two"))
            try agent.waitForLine(containing: "did not answer within 500 ms")
            // The click on the first still goes back while the second waits for the server.
            try mock.emit("ActionInvoked", signature: "us", ["<uint32 1>", "<'default'>"])
            try waitUntil("the Respond", timeout: .seconds(5)) { daemon.responded.count == 1 }
            #expect(daemon.responded[0]["id"] == "m1")
        }
    }

    @Test func theAgentReconnectsWhenTheDaemonRestarts() async throws {
        try await onThread {
            let bus = try SessionBus()
            let mock = try NotificationServerMock(on: bus, capabilities: ["actions", "body"])
            let socket = bus.directory.file("io.coalesced")
            var daemon = try FakePresentationsDaemon(path: socket)
            let agent = try Self.agent(daemon, bus)
            try waitUntil("the stream") { daemon.openStreams == 1 }
            daemon.dropStreams()
            try waitUntil("the agent to call Presentations again") { daemon.presentationsCalls == 2 && daemon.openStreams == 1 }

            daemon.stop()
            try agent.waitForLine(containing: "lost the daemon")
            daemon = try FakePresentationsDaemon(path: socket)
            let restarted = daemon
            try waitUntil("the agent to reach the restarted daemon", timeout: .seconds(20)) { restarted.openStreams == 1 }
            restarted.present(presentation(id: "m1", title: "After the restart"))
            // Generous: on a machine loaded by a whole test run the agent's loop may be slow to come round.
            try waitUntil("the Notify (the agent said: \(agent.output))", timeout: .seconds(60)) { mock.notifyCalls.count == 1 }
            try mock.emit("ActionInvoked", signature: "us", ["<uint32 1>", "<'default'>"])
            try waitUntil("the Respond", timeout: .seconds(60)) { restarted.responded.count == 1 }
        }
    }

    @Test func badUsageIsRefusedWithAClearLine() async throws {
        let run = try await onThread {
            try runProcess(BuildProducts.path(of: "coalesce-notify-agent"), ["--system", "--user"])
        }
        #expect(run.status == 64)
        #expect(run.stderr.contains("--system and --user exclude each other"), "\(run.stderr)")
    }
}

/// The agent between the real daemon and python-dbusmock's notification server: a notification an app schedules
/// reaches the desktop, and the user's click reaches the app.
@Suite struct NotifyAgentEndToEndTests {
    static let app = "org.example.reminders"

    @Test func aScheduledNotificationIsShownAndTheClickReachesTheApp() async throws {
        let daemon = try DaemonProcess(configuration: noDeadlines)
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let bus = try SessionBus()
            let mock = try NotificationServerMock(on: bus, capabilities: ["actions", "body"])
            let client = try testClient(daemon.socketPath)
            // Registered and not running: a banner goes to the desktop (an active app would get it alone).
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
            let agent = try WatchedProcess(
                BuildProducts.path(of: "coalesce-notify-agent"),
                ["--socket", daemon.socketPath],
                environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address]
            )
            try agent.waitForLine(containing: "listening for presentations")

            _ = try client.call("io.coalesced.Notifications.Schedule", [
                "app": .string(Self.app),
                "request": [
                    "id": "lunch",
                    "trigger": ["at": .double(Date().timeIntervalSince1970)],
                    "content": [
                        "title": "Lunch?", "subtitle": "From Ann", "body": "At noon", "userInfo": ["note": 7],
                        "actions": [["id": "snooze", "title": "Snooze"]],
                    ],
                ],
            ])
            let call = try waitUntil("the Notify of the scheduled notification") { mock.notifyCalls.first }
            #expect(call.contains(
                #"Notify "org.example.reminders" 0 "" "Lunch?" "From Ann\#nAt noon" ["default", "Open", "snooze", "Snooze"] "#
            ), "\(call)")
            #expect(call.contains(#""x-coalesced-app": "org.example.reminders", "x-coalesced-id": "lunch""#), "\(call)")

            // The click on the notification: Respond with default, which waits for the app, and the app that then
            // starts gets it after its launch.
            try mock.emit("ActionInvoked", signature: "us", ["<uint32 1>", "<'default'>"])
            let app = try ExampleApp(socket: daemon.socketPath, name: Self.app)
            #expect(try app.nextCallbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            let response = try app.waitForLine("notification didReceiveResponse")
            #expect(response == #"notification didReceiveResponse id=lunch action=default text=- userInfo={"note":7}"#)
            agent.child.signal(SIGTERM)
            #expect(agent.child.wait(timeout: .seconds(10)) == 0)
        }
        daemon.signal(SIGKILL)
    }
}
