import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// Registering apps over the real socket: durable, owned by the registering uid, visible to admins.
@Suite struct AppRegistryTests {
    @Test func registerListGetAndStats() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            let registered = try client.call(
                "io.coalesced.App.Register",
                ["name": "org.example.mail", "backgroundModes": ["voip", "audio"], "launchUnit": "mail.service"]
            )
            var app = registered["app"]?.objectValue ?? [:]
            #expect(app.removeValue(forKey: "since")?.doubleValue ?? 0 > 1_700_000_000, "since: seconds since the epoch")
            #expect(
                app == [
                    "name": "org.example.mail", "state": "notRunning", "owner": 0, "backgroundModes": ["audio", "voip"],
                    "exitsOnSuspend": false, "launchUnit": "mail.service", "tasks": 0, "attached": false,
                ]
            )
            _ = try client.call("io.coalesced.App.Register", ["name": "org.example.alarm", "exitsOnSuspend": true])
            let listed = try client.call("io.coalesced.System.ListApps")["apps"]?.arrayValue ?? []
            #expect(listed.compactMap { $0["name"]?.stringValue } == ["org.example.alarm", "org.example.mail"])
            #expect(try client.call("io.coalesced.System.GetApp", ["app": "org.example.alarm"])["app"]?["exitsOnSuspend"] == true)
            #expect(try client.call("io.coalesced.System.Stats")["stats"]?["apps"] == 2)
        }
        daemon.signal(SIGKILL)
    }

    @Test func badRequestsGetErrorsThatNameTheProblem() async throws {
        let daemon = try DaemonProcess(configuration: "[Apps]\nMaxApps=1\n")
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            #expect(
                throws: VarlinkError(
                    name: "io.coalesced.App.InvalidAppName",
                    parameters: ["name": "Mail", "reason": "expected reverse-DNS form such as org.example.mail"]
                )
            ) { try client.call("io.coalesced.App.Register", ["name": "Mail"]) }
            #expect(throws: VarlinkError.invalidParameter("backgroundModes", reason: "expected an array of string, got a string")) {
                try client.call("io.coalesced.App.Register", ["name": "org.example.a", "backgroundModes": "audio"])
            }
            #expect(
                throws: VarlinkError(
                    name: "io.coalesced.App.InvalidLaunchUnit",
                    parameters: [
                        "unit": "../x",
                        "reason": #"expected the name of a service unit (NAME.service, at most 255 bytes, no '/' and no control character), or "" for none"#,
                    ]
                )
            ) {
                try client.call("io.coalesced.App.Register", ["name": "org.example.a", "launchUnit": "../x"])
            }
            _ = try client.call("io.coalesced.App.Register", ["name": "org.example.a"])
            #expect(throws: VarlinkError(name: "io.coalesced.App.TooManyApps", parameters: ["limit": 1])) {
                try client.call("io.coalesced.App.Register", ["name": "org.example.b"])
            }
            #expect(throws: VarlinkError(name: "io.coalesced.System.NoSuchApp", parameters: ["app": "org.example.b"])) {
                try client.call("io.coalesced.System.GetApp", ["app": "org.example.b"])
            }
            #expect(try client.call("io.coalesced.System.Stats")["stats"]?["apps"] == 1, "refused requests register nothing")
        }
        daemon.signal(SIGKILL)
    }

    @Test func registrationsSurviveKillMinusNine() async throws {
        let first = try DaemonProcess()
        try await onThread { try first.waitUntilReady() }
        try await onThread { _ = try testClient(first.socketPath).call("io.coalesced.App.Register", ["name": "org.example.mail"]) }
        let second = try await onThread { try first.restartedWhenReady() }
        let apps = try await onThread { try testClient(second.socketPath).call("io.coalesced.System.ListApps")["apps"] }
        #expect(apps?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["org.example.mail"])
        second.signal(SIGKILL)
    }

    @Test func aDamagedStoreStopsStartUpAndSaysWhichFile() async throws {
        let directory = try TemporaryDirectory()
        let garbage = String(repeating: "not a database. ", count: 512)
        try directory.write("state/coalesced.db", garbage)
        let daemon = try DaemonProcess(arguments: ["--state-dir", directory.file("state")])
        #expect(try await onThread { daemon.waitForExit() } == 1)
        #expect(daemon.output.contains("\(directory.file("state/coalesced.db")) cannot be used"), "\(daemon.output)")
        #expect(daemon.output.contains("move it aside"))
        #expect(try String(contentsOfFile: directory.file("state/coalesced.db"), encoding: .utf8) == garbage, "left as it was")
    }

    /// A row the daemon cannot read (here a held kind's text cut short, as a torn or tampered page leaves it) does not
    /// stop start-up: the app's held data is set aside in the store, named in the journal and in Stats, and the
    /// daemon serves.
    @Test func aDamagedRowIsSetAsideAndTheDaemonStarts() async throws {
        let first = try DaemonProcess()
        try await onThread { try first.waitUntilReady() }
        try await onThread {
            let client = try testClient(first.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": "org.example.mail"])
            _ = try client.call("io.coalesced.App.Post", ["target": "org.example.mail", "kind": "badge", "payload": ["unread": 1]])
        }
        first.signal(SIGTERM)
        #expect(try await onThread { first.waitForExit() } == 0)
        let database = first.stateDirectory + "/coalesced.db"
        try await onThread { try editStore(database, "UPDATE held SET slot = substr(slot, 1, 10)") }
        let second = try await onThread { try first.restartedWhenReady() }
        try await onThread {
            let client = try testClient(second.socketPath)
            try waitUntil("the held data to be set aside") {
                try client.call("io.coalesced.System.Stats")["stats"]?["setAside"]?.arrayValue?.first?["app"] == "org.example.mail"
            }
            #expect(second.output.contains("What org.example.mail holds cannot be read (what it holds of badge cannot be read)"), "\(second.output)")
            #expect(try client.call("io.coalesced.System.GetQueue", ["app": "org.example.mail"])["held"] == [])
        }
        second.signal(SIGKILL)
    }

    @Test func theRegistryFileOfEarlierVersionsIsImportedOnce() async throws {
        let directory = try TemporaryDirectory()
        try directory.write(
            "state/apps.json",
            #"{"version":1,"apps":[{"name":"org.example.mail","owner":65534,"backgroundModes":["voip"],"exitsOnSuspend":false,"launchUnit":"mail.service"}]}"#
        )
        let daemon = try DaemonProcess(arguments: ["--state-dir", directory.file("state")])
        try await onThread { try daemon.waitUntilReady() }
        let app = try await onThread { try testClient(daemon.socketPath).call("io.coalesced.System.GetApp", ["app": "org.example.mail"])["app"] }
        #expect(app?["owner"] == 65534 && app?["backgroundModes"] == ["voip"] && app?["launchUnit"] == "mail.service")
        #expect(FileManager.default.fileExists(atPath: directory.file("state/apps.json.imported")))
        #expect(!FileManager.default.fileExists(atPath: directory.file("state/apps.json")))
        daemon.signal(SIGKILL)
    }

    @Test func aDamagedRegistryStopsStartUpAndSaysWhichFile() async throws {
        let directory = try TemporaryDirectory()
        try directory.write("state/apps.json", "{not json")
        let daemon = try DaemonProcess(arguments: ["--state-dir", directory.file("state")])
        #expect(try await onThread { daemon.waitForExit() } == 1)
        #expect(daemon.output.contains("\(directory.file("state/apps.json")) is damaged"))
        #expect(try String(contentsOfFile: directory.file("state/apps.json"), encoding: .utf8) == "{not json", "left as it was")
    }
}

/// Two real uids: root and nobody, the second through coalescectl run with setpriv.
@Suite struct AppOwnershipTests {
    /// coalescectl talking to `daemon` as nobody.
    func asNobody(_ daemon: DaemonProcess, _ arguments: [String]) async throws -> Run {
        try await onThread { try coalescectlAsNobody(daemon, arguments) }
    }

    @Test func anotherUserCannotTakeAnAppOrListAppsUnlessAdmin() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let socket = daemon.socketPath
        try await onThread { _ = try testClient(socket).call("io.coalesced.App.Register", ["name": "org.example.mail"]) }

        let taken = try await self.asNobody(daemon, ["call", "io.coalesced.App.Register", #"{"name":"org.example.mail"}"#])
        #expect(taken.status == 1)
        #expect(taken.stderr.contains(#"io.coalesced.App.NotOwner {"app":"org.example.mail"}"#), "\(taken.stderr)")

        let own = try await self.asNobody(daemon, ["call", "--json", "io.coalesced.App.Register", #"{"name":"org.example.nobody"}"#])
        #expect(own.status == 0, "\(own.stderr)")
        #expect(try JSONParser.parse(own.stdout)["app"]?["owner"] == 65534)

        let listed = try await self.asNobody(daemon, ["apps"])
        #expect(listed.status == 1)
        #expect(listed.stderr.contains("org.varlink.service.PermissionDenied"))
        #expect(listed.stderr.contains("AdminGroup= in coalesced.conf"), "the line says what lets a user in: \(listed.stderr)")

        // Root may act for any app; the owner stays.
        let updated = try await onThread {
            try testClient(socket).call("io.coalesced.App.Register", ["name": "org.example.nobody", "exitsOnSuspend": true])
        }
        #expect(updated["app"]?["owner"] == 65534)
        daemon.signal(SIGKILL)
    }

    @Test func anotherUserCannotAttachAckOrEndTasksForAnAppItDoesNotOwnNorDriveApps() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let mail = try ExampleApp(socket: daemon.socketPath, name: "org.example.mail", arguments: ["--task-on-background", "sync"])
        let socket = daemon.socketPath
        #expect(try await onThread { try mail.nextCallbacks(3) } == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        let notOwner = #"io.coalesced.App.NotOwner {"app":"org.example.mail"}"#
        for (method, parameters) in [
            ("Ack", #"{"app":"org.example.mail","seq":2}"#),
            ("BeginBackgroundTask", #"{"app":"org.example.mail","name":"x"}"#),
            ("EndBackgroundTask", #"{"app":"org.example.mail","id":1}"#),
            ("SaveState", #"{"app":"org.example.mail","data":"stolen"}"#),
        ] {
            let run = try await self.asNobody(daemon, ["call", "io.coalesced.App." + method, parameters])
            #expect(run.status == 1 && run.stderr.contains(notOwner), "\(method): \(run.stderr)")
        }
        let attach = try await self.asNobody(daemon, ["call", "--more", "io.coalesced.App.Attach", #"{"app":"org.example.mail"}"#])
        #expect(attach.status == 1 && attach.stderr.contains(notOwner), "\(attach.stderr)")
        for arguments in [["deactivate"], ["terminate", "org.example.mail"], ["purge"], ["monitor"], ["launch", "org.example.mail"]] {
            let run = try await self.asNobody(daemon, arguments)
            #expect(run.status == 1 && run.stderr.contains("org.varlink.service.PermissionDenied"), "\(arguments): \(run.stderr)")
        }
        let mailState = try await onThread { try testClient(socket).call("io.coalesced.System.GetApp", ["app": "org.example.mail"]) }
        #expect(mailState["app"]?["state"] == "active")
        #expect(mail.unreadCallbacks.isEmpty, "nothing reached the app")

        // nobody's own app lives its lifecycle like any other, and root drives it.
        // Its start copies the example app's binary (tens of megabytes): on a thread of its own.
        let own = try await onThread {
            try ExampleApp(
                socket: daemon.socketPath,
                name: "org.example.nobody",
                asUser: "nobody",
                directory: daemon.directory
            )
        }
        try await onThread {
            let root = try testClient(socket)
            #expect(try own.nextCallbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            #expect(try mail.nextCallbacks(2) == ["willResignActive", "didEnterBackground"], "one foreground app")
            #expect(try root.call("io.coalesced.System.GetApp", ["app": "org.example.nobody"])["app"]?["owner"] == 65534)
            _ = try root.call("io.coalesced.System.Terminate", ["app": "org.example.nobody"])
            #expect(try own.nextCallbacks(1) == ["willTerminate"])
            #expect(own.child.wait(timeout: .seconds(10)) == 0)
        }
        daemon.signal(SIGKILL)
    }

    @Test func onlyAnAdminChoosesTheUnitThatLaunchesAnApp() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let chosen = try await self.asNobody(
            daemon,
            ["call", "io.coalesced.App.Register", #"{"name":"org.example.nobody","launchUnit":"systemd-poweroff.service"}"#]
        )
        #expect(chosen.status == 1)
        #expect(
            chosen.stderr.contains(#"io.coalesced.App.LaunchUnitNotAllowed {"app":"org.example.nobody","unit":"systemd-poweroff.service"}"#),
            "\(chosen.stderr)"
        )
        let registered = try await self.asNobody(daemon, ["call", "io.coalesced.App.Register", #"{"name":"org.example.nobody"}"#])
        #expect(registered.status == 0, "\(registered.stderr)")
        let socket = daemon.socketPath
        try await onThread {
            _ = try testClient(socket).call("io.coalesced.App.Register", ["name": "org.example.nobody", "launchUnit": "nobody-app.service"])
        }
        // The owner may repeat the unit the admin chose, or leave it out: it stays.
        let same = try await self.asNobody(
            daemon,
            ["call", "io.coalesced.App.Register", #"{"name":"org.example.nobody","launchUnit":"nobody-app.service"}"#]
        )
        #expect(same.status == 0, "\(same.stderr)")
        let leftOut = try await self.asNobody(daemon, ["call", "io.coalesced.App.Register", #"{"name":"org.example.nobody","exitsOnSuspend":true}"#])
        #expect(leftOut.status == 0, "\(leftOut.stderr)")
        try await onThread { () throws in
            #expect(try testClient(socket).call("io.coalesced.System.GetApp", ["app": "org.example.nobody"])["app"]?["launchUnit"] == "nobody-app.service")
        }
        daemon.signal(SIGKILL)
    }

    @Test func membersOfTheAdminGroupMayListApps() async throws {
        let daemon = try DaemonProcess(configuration: "[Daemon]\nAdminGroup=nogroup\n")
        try await onThread { try daemon.waitUntilReady() }
        try await onThread { _ = try testClient(daemon.socketPath).call("io.coalesced.App.Register", ["name": "org.example.mail"]) }
        let listed = try await self.asNobody(daemon, ["apps"])
        #expect(listed.status == 0, "\(listed.stderr)")
        let lines = listed.stdout.split(separator: "\n")
        #expect(lines.first?.hasPrefix("APP") == true)
        #expect(lines.contains { $0.hasPrefix("org.example.mail") && $0.contains("notRunning") })
        daemon.signal(SIGKILL)
    }

    @Test func aSupplementaryGroupCountsWhileTheCallerHasIt() async throws {
        let daemon = try DaemonProcess(configuration: "[Daemon]\nAdminGroup=users\n")
        try await onThread { try daemon.waitUntilReady() }
        let copy = try await onThread { try executableCopy(of: "coalescectl", in: daemon.directory) }
        let socket = daemon.socketPath
        let (member, outsider) = try await onThread {
            (
                try runProcess("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--groups=users", copy, "--socket", socket, "apps"]),
                try runProcess("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", copy, "--socket", socket, "apps"])
            )
        }
        #expect(member.status == 0, "\(member.stderr)")
        #expect(outsider.status != 0 && outsider.stderr.contains("PermissionDenied"), "\(outsider.stderr)")
        daemon.signal(SIGKILL)
    }
}
