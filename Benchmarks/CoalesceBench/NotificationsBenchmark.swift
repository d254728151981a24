import CoalesceTestSupport
import Foundation
import Systemd
import Varlink


/// Local notifications at scale: Schedule calls per second (durable, pipelined as the post benchmark pipelines
/// posts, with durable posts to the same daemon in the same run as the baseline), the daemon's memory and its
/// start-up to READY=1 with the requests in its store, and how late presentations reach an agent's stream after
/// their fire dates, beside the lateness of a bare timerfd on the same machine in the same run (the floor).
struct NotificationsBenchmark {
    var pending: Int
    var apps: Int
    var burst: Int
    var spread: Int
    var spreadSeconds: Int

    static let producers = 4
    static let window = 64

    func run() throws {
        let perApp = self.pending / self.apps
        // The presentation rate raised past the burst: what is measured is how late a presentation is, not the rate.
        let configuration =
            "[Notifications]\nPendingLimit=\(max(perApp, self.burst / self.apps, self.spread / self.apps) + 64)\nPresentationBurst=1000000\n"
        let daemon = try DaemonProcess(configuration: configuration)
        try daemon.waitUntilReady()
        let socket = daemon.socketPath
        let client = try VarlinkClient(path: socket)
        for index in 0..<self.apps {
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.appName(index))])
        }
        for index in 0..<4 { _ = try client.call("io.coalesced.App.Register", ["name": .string("org.bench.target\(index)")]) }

        print("| notifications | value |")
        print("|---|---|")
        let posts = try EventsBenchmark.pipelined(socket, producers: Self.producers, posts: 50_000, payload: EventsBenchmark.payload)
        print("| baseline: durable posts/s, \(Self.producers) producers pipelined, same daemon | \(Int(posts)) |")
        // Yearly calendar rules spread over the year's days and minutes: a handful may come due during the run.
        let scheduled = try Self.pipelinedSchedules(socket, count: self.pending, apps: self.apps) { index in
            let minute = index % 1_440
            let calendar: JSONObject = [
                "month": .int(Int64(1 + index % 12)), "day": .int(Int64(1 + index % 28)),
                "hour": .int(Int64(minute / 60)), "minute": .int(Int64(minute % 60)),
            ]
            return [
                "id": .string("r\(index / self.apps)"),
                "trigger": ["calendar": .object(calendar), "repeats": true],
                "content": ["title": "Reminder", "body": "Pending in the benchmark", "threadId": "bench"],
            ]
        }
        print("| Schedule calls/s, \(self.pending) requests over \(self.apps) apps, \(Self.producers) producers pipelined | \(Int(scheduled)) |")
        Thread.sleep(forTimeInterval: 1)
        print("| RSS with \(self.pending) pending requests | \((daemon.residentKiB ?? 0) / 1024) MiB |")

        let empty = try DaemonProcess()
        let emptyStart = ContinuousClock.now
        try empty.waitUntilReady()
        let emptyStartup = (ContinuousClock.now - emptyStart).milliseconds
        empty.signal(SIGTERM)
        _ = empty.waitForExit()
        daemon.signal(SIGTERM)
        _ = daemon.waitForExit()
        let restartedStart = ContinuousClock.now
        let restarted = try daemon.restarted(configuration: configuration)
        try restarted.waitUntilReady(timeout: .seconds(120))
        let startup = (ContinuousClock.now - restartedStart).milliseconds
        print("| baseline: start-up to READY=1, empty store | \(EventsBenchmark.format(emptyStartup)) ms |")
        print("| start-up to READY=1 with \(self.pending) pending requests in the store | \(EventsBenchmark.format(startup)) ms |")
        print("")

        // Lateness: fire date to the agent's stream.
        print("| lateness, fire date to arrival | p50 | p99 | max |")
        print("|---|---|---|---|")
        let floor = try Self.timerfdLateness(count: 2_000)
        print(Self.row("baseline: bare CLOCK_REALTIME timerfd, \(floor.count) wakes", floor))
        let again = try VarlinkClient(path: socket)
        for index in 0..<self.apps { _ = try again.call("io.coalesced.Notifications.Cancel", ["app": .string(Self.appName(index)), "all": true]) }
        let same = try self.lateness(socket, count: self.burst) { _ in 0 }
        print(Self.row("\(self.burst) requests due in the same second", same))
        let spreadSeconds = Double(self.spreadSeconds)
        let spread = try self.lateness(socket, count: self.spread) { index in Double(index) * spreadSeconds / Double(self.spread) }
        print(Self.row("\(self.spread) requests spread over \(self.spreadSeconds) s", spread))
        print("")
        restarted.signal(SIGTERM)
        _ = restarted.waitForExit()
    }

    static func appName(_ index: Int) -> String { "org.bench.notify\(index)" }

    /// Schedules `count` requests (`request(index)` each, for app `index % apps`) from ``producers`` connections,
    /// ``window`` calls in flight on each; returns calls per second.
    static func pipelinedSchedules(_ socket: String, count: Int, apps: Int, _ request: @escaping @Sendable (Int) -> JSONObject) throws -> Double {
        let start = ContinuousClock.now
        let done = DispatchGroup()
        let failures = LockedCount()
        let errorMember = Array(#""error""#.utf8)
        for producer in 0..<Self.producers {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                do {
                    let client = try VarlinkClient(path: socket)
                    let mine = Array(stride(from: producer, to: count, by: Self.producers))
                    var sent = 0
                    var answered = 0
                    var burst: [UInt8] = []
                    while answered < mine.count {
                        burst.removeAll(keepingCapacity: true)
                        while sent < mine.count, sent == answered || sent % Self.window != 0 {
                            let index = mine[sent]
                            VarlinkCall(
                                method: "io.coalesced.Notifications.Schedule",
                                parameters: ["app": .string(Self.appName(index % apps)), "request": .object(request(index))]
                            ).message.write(to: &burst)
                            burst.append(0)
                            sent += 1
                        }
                        if !burst.isEmpty { try client.sendRaw(burst) }
                        let reply = try client.receiveFrame()
                        if reply.count >= errorMember.count,
                            (0...(reply.count - errorMember.count)).contains(where: { reply[$0..<$0 + errorMember.count].elementsEqual(errorMember) })
                        {
                            failures.add()
                            if failures.value == 1 { print("first failed Schedule: \(String(decoding: reply, as: UTF8.self))") }
                        }
                        answered += 1
                    }
                } catch {
                    print("a producer failed: \(error)")
                    failures.add()
                }
            }
        }
        done.wait()
        guard failures.value == 0 else { throw SupportError("\(failures.value) Schedule calls failed") }
        return Double(count) / ((ContinuousClock.now - start).milliseconds / 1000)
    }

    /// Schedules `count` requests due at a base instant a few seconds ahead plus `offset(index)` seconds, and
    /// measures, on an agent's stream (Presentations), how long after its date each presentation arrives, in µs.
    private func lateness(_ socket: String, count: Int, offset: @escaping @Sendable (Int) -> Double) throws -> [Double] {
        let agent = try VarlinkClient(path: socket)
        agent.setReceiveTimeout(.seconds(120))
        try agent.send(VarlinkCall(method: "io.coalesced.Notifications.Presentations", parameters: [:], more: true))
        _ = try agent.receiveReply()
        let base = (Date().timeIntervalSince1970 + 5 + Double(count) / 2_000).rounded(.up)
        _ = try Self.pipelinedSchedules(socket, count: count, apps: self.apps) { index in
            ["id": .string("late\(index)"), "trigger": ["at": .double(base + offset(index))], "content": ["title": "Due"]]
        }
        var samples: [Double] = []
        samples.reserveCapacity(count)
        while samples.count < count {
            let reply = try agent.receiveReply()
            let arrived = Self.wallSeconds()
            guard let date = reply.parameters["presentation"]?["date"]?.doubleValue else { continue }
            samples.append((arrived - date) * 1e6)
        }
        return samples.sorted()
    }

    /// How late a CLOCK_REALTIME timerfd armed at absolute instants wakes a thread polling it, in µs.
    static func timerfdLateness(count: Int) throws -> [Double] {
        let timer = try TimerFD(clock: .realtime, nonBlocking: false)
        var samples: [Double] = []
        for index in 0..<count {
            let target = SystemClock.realtime.now().totalNanoseconds + 1_000_000 + Int64(index % 10) * 100_000
            try timer.arm(at: .nanoseconds(target))
            _ = try Poll.wait([(timer.descriptor, .readable)], timeout: nil)
            try timer.readExpirations()
            samples.append(Double(SystemClock.realtime.now().totalNanoseconds - target) / 1000)
        }
        return samples.sorted()
    }

    static func wallSeconds() -> Double {
        SystemClock.realtime.now().totalSeconds
    }

    static func row(_ label: String, _ sorted: [Double]) -> String {
        func ms(_ microseconds: Double) -> String {
            microseconds < 1000 ? "\(EventsBenchmark.format(microseconds)) µs" : "\(EventsBenchmark.format(microseconds / 1000)) ms"
        }
        return "| \(label) | \(ms(sorted.percentile(0.5))) | \(ms(sorted.percentile(0.99))) | \(ms(sorted.last ?? 0)) |"
    }
}
