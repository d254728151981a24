import CSystemd
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A signal received on a ``BusConnection``.
public struct BusSignal: Sendable {
    public var sender: String?
    public var path: String
    public var interface: String
    public var member: String
    public var arguments: [BusValue]
}

/// What a signal match selects; `nil` matches anything.
public struct BusSignalMatch: Sendable, Hashable {
    public var sender: String?
    public var path: String?
    public var interface: String?
    public var member: String?

    public init(sender: String?, path: String?, interface: String?, member: String?) {
        self.sender = sender
        self.path = path
        self.interface = interface
        self.member = member
    }

    /// `org.freedesktop.DBus.Properties.PropertiesChanged` of one object.
    public static func propertiesChanged(sender: String, path: String?) -> BusSignalMatch {
        BusSignalMatch(sender: sender, path: path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")
    }
}

/// One long-lived connection to the system (or the user's) D-Bus, served by a thread of its own: calls are made
/// asynchronously with a timeout each, and signals are handed to their handlers on that thread.
///
/// sd-bus is not thread-safe, so only the connection's thread touches the `sd_bus`: callers queue work for it and
/// wake it through an eventfd. When the bus goes away (dbus restarted), the connection opens it again, once a second
/// at most, puts its matches back and tells the ``onReconnect(_:)`` handlers, so that what a peer held for the daemon
/// (an inhibitor) can be taken again.
public final class BusConnection: @unchecked Sendable {
    /// What a peer's restart or the bus's loss means to a caller: say it once, take what was held again.
    public typealias ReconnectHandler = @Sendable () -> Void

    /// Which bus: the system's, or the calling user's (where a user's systemd instance listens).
    public enum Scope: Sendable {
        case system
        case user
    }

    private struct Subscription {
        var match: BusSignalMatch
        var handler: @Sendable (BusSignal) -> Void
        var slot: OpaquePointer?
        let box: SubscriptionBox
    }

    /// State shared by callers and the thread; the `sd_bus` itself is the thread's alone.
    private struct Shared {
        var jobs: [@Sendable (BusConnection) -> Void] = []
        var stopping = false
        var reconnectHandlers: [ReconnectHandler] = []
    }

    private let scope: BusConnection.Scope
    private let shared = Mutex(Shared())
    private let wakeFD: Int32
    private var thread = pthread_t()
    private let threadName: String

    // The thread's own.
    private var bus: OpaquePointer?
    private var subscriptions: [Int: Subscription] = [:]
    private var pendingCalls: [ObjectIdentifier: CallBox] = [:]
    private var nextSubscription = 1
    private var reconnectAt: UInt64?

    /// Opens the bus and starts the thread that serves it; throws when the bus cannot be reached now.
    public init(_ scope: BusConnection.Scope, threadName: String = "coalesced-bus") throws(SystemdError) {
        self.scope = scope
        self.threadName = threadName
        self.bus = try Self.openBus(scope)
        let wake = eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK))
        guard wake >= 0 else {
            sd_bus_flush_close_unref(self.bus)
            throw SystemdError(operation: "eventfd", errno: errno)
        }
        self.wakeFD = wake
        let started = pthread_create(&self.thread, nil, { context in
            let connection = Unmanaged<BusConnection>.fromOpaque(context!).takeRetainedValue()
            connection.serve()
            return nil
        }, Unmanaged.passRetained(self).toOpaque())
        guard started == 0 else {
            Unmanaged.passUnretained(self).release()
            sd_bus_flush_close_unref(self.bus)
            throw SystemdError(operation: "pthread_create", errno: started)  // deinit closes the eventfd
        }
    }

    deinit {
        Glibc.close(self.wakeFD)
    }

    /// Stops the thread and closes the bus; pending calls fail. Returns once the thread has ended.
    public func close() {
        let first = self.shared.withLock { shared in
            defer { shared.stopping = true }
            return !shared.stopping
        }
        guard first else { return }
        self.wake()
        if pthread_equal(self.thread, pthread_self()) != 0 {
            pthread_detach(self.thread)
        } else {
            pthread_join(self.thread, nil)
        }
    }

    /// Called, on the connection's thread, each time the bus was lost and is open again.
    public func onReconnect(_ handler: @escaping ReconnectHandler) {
        self.shared.withLock { $0.reconnectHandlers.append(handler) }
    }

    /// Calls a method and returns its reply's values; a D-Bus error reply, or no reply within `timeout`, throws.
    public func call(
        destination: String,
        path: String,
        interface: String,
        member: String,
        arguments: [BusArgument] = [],
        timeout: Duration = .seconds(25)
    ) async throws(SystemdError) -> [BusValue] {
        let operation = "call \(interface).\(member)"
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<[BusValue], SystemdError>, Never>) in
            let box = CallBox(operation: operation, continuation: continuation)
            let queued = self.enqueue { connection in
                connection.startCall(box, destination: destination, path: path, interface: interface, member: member, arguments: arguments, timeout: timeout)
            }
            if !queued { box.finish(.failure(SystemdError(operation: operation, errno: ESHUTDOWN))) }
        }
        return try result.get()
    }

    /// Reads a property (`org.freedesktop.DBus.Properties.Get`).
    public func property(
        destination: String,
        path: String,
        interface: String,
        name: String,
        timeout: Duration = .seconds(25)
    ) async throws(SystemdError) -> BusValue {
        let reply = try await self.call(
            destination: destination, path: path, interface: "org.freedesktop.DBus.Properties", member: "Get",
            arguments: [.string(interface), .string(name)], timeout: timeout
        )
        guard let value = reply.first else {
            throw SystemdError(operation: "get \(interface).\(name)", errno: EBADMSG)
        }
        return value.unwrapped
    }

    /// Hands every signal that matches to `handler`, on the connection's thread, until the subscription is
    /// cancelled. Returns once the match is in place on the bus: a call made after it cannot outrun its signal.
    public func subscribe(
        _ match: BusSignalMatch,
        handler: @escaping @Sendable (BusSignal) -> Void
    ) async throws(SystemdError) -> BusSubscription {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Int, SystemdError>, Never>) in
            let queued = self.enqueue { connection in
                continuation.resume(returning: connection.addSubscription(match, handler: handler))
            }
            if !queued { continuation.resume(returning: .failure(SystemdError(operation: "add a D-Bus match", errno: ESHUTDOWN))) }
        }
        return BusSubscription(connection: self, id: try result.get())
    }

    func unsubscribe(_ id: Int) {
        _ = self.enqueue { connection in
            guard let subscription = connection.subscriptions.removeValue(forKey: id) else { return }
            sd_bus_slot_unref(subscription.slot)
        }
    }

    // MARK: The thread

    private func enqueue(_ job: @escaping @Sendable (BusConnection) -> Void) -> Bool {
        let queued = self.shared.withLock { shared -> Bool in
            guard !shared.stopping else { return false }
            shared.jobs.append(job)
            return true
        }
        if queued { self.wake() }
        return queued
    }

    private func wake() {
        var one: UInt64 = 1
        _ = write(self.wakeFD, &one, 8)
    }

    private func serve() {
        var leftover: [@Sendable (BusConnection) -> Void] = []
        nameThisThread(self.threadName)
        while true {
            self.dispatch()
            let (jobs, stopping) = self.shared.withLock { shared in
                defer { shared.jobs.removeAll() }
                return (shared.jobs, shared.stopping)
            }
            if stopping {
                // Taken with the stop: they are answered below, once the bus is closed (their calls then fail).
                leftover = jobs
                break
            }
            if !jobs.isEmpty {
                for job in jobs { job(self) }
                continue  // the jobs may have queued messages, and replies may already be waiting
            }
            self.waitForWork()
        }
        self.disconnect(reason: ESHUTDOWN)
        // Jobs queued before the stop still answer their callers.
        let left = self.shared.withLock { shared in
            defer { shared.jobs.removeAll() }
            return shared.jobs
        }
        for job in leftover + left { job(self) }
    }

    /// Processes what the bus has for us until there is nothing left; a lost bus is closed, to be opened again.
    private func dispatch() {
        guard let bus = self.bus else {
            if let at = self.reconnectAt, Self.monotonicMicroseconds() >= at { self.reconnect() }
            return
        }
        while true {
            let result = sd_bus_process(bus, nil)
            if result < 0 {
                self.disconnect(reason: -result)
                self.reconnectAt = Self.monotonicMicroseconds() + 1_000_000
                return
            }
            if result == 0 { return }
        }
    }

    private func waitForWork() {
        var descriptors = [pollfd(fd: self.wakeFD, events: Int16(POLLIN), revents: 0)]
        var timeout: Int32 = -1
        if let bus = self.bus {
            let events = sd_bus_get_events(bus)
            descriptors.append(pollfd(fd: sd_bus_get_fd(bus), events: Int16(max(events, 0)), revents: 0))
            var until: UInt64 = 0
            if sd_bus_get_timeout(bus, &until) > 0, until != UInt64.max {
                timeout = Self.milliseconds(until: until)
            }
        } else if let at = self.reconnectAt {
            timeout = Self.milliseconds(until: at)
        }
        _ = poll(&descriptors, nfds_t(descriptors.count), timeout)
        if descriptors[0].revents != 0 {
            var count: UInt64 = 0
            _ = read(self.wakeFD, &count, 8)
        }
    }

    private func reconnect() {
        guard let bus = try? Self.openBus(self.scope) else {
            self.reconnectAt = Self.monotonicMicroseconds() + 1_000_000
            return
        }
        self.bus = bus
        self.reconnectAt = nil
        for (id, subscription) in self.subscriptions {
            var slot: OpaquePointer?
            if Self.addMatch(bus, subscription.match, box: subscription.box, slot: &slot) >= 0 {
                self.subscriptions[id]!.slot = slot
            }
        }
        for handler in self.shared.withLock({ $0.reconnectHandlers }) { handler() }
    }

    /// Closes the bus; calls waiting for replies fail, and the matches are kept for the next bus.
    private func disconnect(reason: Int32) {
        for id in self.subscriptions.keys {
            sd_bus_slot_unref(self.subscriptions[id]!.slot)
            self.subscriptions[id]!.slot = nil
        }
        if let bus = self.bus {
            sd_bus_flush_close_unref(bus)
            self.bus = nil
        }
        let pending = self.pendingCalls.values
        self.pendingCalls.removeAll()
        for box in pending {
            box.finish(.failure(SystemdError(operation: box.operation, errno: reason, busError: "the connection to the bus was lost")))
            Unmanaged.passUnretained(box).release()
        }
    }

    private func startCall(
        _ box: CallBox,
        destination: String,
        path: String,
        interface: String,
        member: String,
        arguments: [BusArgument],
        timeout: Duration
    ) {
        guard let bus = self.bus else {
            box.finish(.failure(SystemdError(operation: box.operation, errno: ENOTCONN, busError: "not connected to the bus")))
            return
        }
        var message: OpaquePointer?
        var result = sd_bus_message_new_method_call(bus, &message, destination, path, interface, member)
        defer { sd_bus_message_unref(message) }
        for argument in arguments where result >= 0 {
            result = argument.append(to: message)
        }
        if result >= 0 {
            let context = Unmanaged.passRetained(box).toOpaque()
            result = sd_bus_call_async(bus, nil, message, Self.replied, context, timeout.systemdMicroseconds)
            if result >= 0 {
                box.connection = self
                self.pendingCalls[ObjectIdentifier(box)] = box
                return
            }
            Unmanaged<CallBox>.fromOpaque(context).release()
        }
        box.finish(.failure(SystemdError(operation: box.operation, errno: -result)))
    }

    private static let replied: sd_bus_message_handler_t = { message, context, _ in
        let box = Unmanaged<CallBox>.fromOpaque(context!).takeRetainedValue()
        box.connection?.pendingCalls.removeValue(forKey: ObjectIdentifier(box))
        if sd_bus_message_is_method_error(message, nil) != 0 {
            let error = sd_bus_message_get_error(message)
            let name = error?.pointee.name.map { String(cString: $0) } ?? "org.freedesktop.DBus.Error.Failed"
            let text = error?.pointee.message.map { String(cString: $0) } ?? ""
            box.finish(.failure(SystemdError(
                operation: box.operation,
                errno: sd_bus_message_get_errno(message),
                busError: "\(name): \(text)"
            )))
        } else {
            do throws(SystemdError) {
                box.finish(.success(try BusMessageReader.readAll(message)))
            } catch {
                box.finish(.failure(error))
            }
        }
        return 1
    }

    private func addSubscription(_ match: BusSignalMatch, handler: @escaping @Sendable (BusSignal) -> Void) -> Result<Int, SystemdError> {
        guard let bus = self.bus else {
            return .failure(SystemdError(operation: "add a D-Bus match", errno: ENOTCONN, busError: "not connected to the bus"))
        }
        let id = self.nextSubscription
        self.nextSubscription += 1
        let box = SubscriptionBox(handler: handler)
        var slot: OpaquePointer?
        let result = Self.addMatch(bus, match, box: box, slot: &slot)
        guard result >= 0 else { return .failure(SystemdError(operation: "add a D-Bus match", errno: -result)) }
        self.subscriptions[id] = Subscription(match: match, handler: handler, slot: slot, box: box)
        return .success(id)
    }

    private static func addMatch(_ bus: OpaquePointer, _ match: BusSignalMatch, box: SubscriptionBox, slot: inout OpaquePointer?) -> Int32 {
        withOptionalCString(match.sender) { sender in
            withOptionalCString(match.path) { path in
                withOptionalCString(match.interface) { interface in
                    withOptionalCString(match.member) { member in
                        sd_bus_match_signal(bus, &slot, sender, path, interface, member, Self.signalled, Unmanaged.passUnretained(box).toOpaque())
                    }
                }
            }
        }
    }

    private static let signalled: sd_bus_message_handler_t = { message, context, _ in
        let box = Unmanaged<SubscriptionBox>.fromOpaque(context!).takeUnretainedValue()
        guard let arguments = try? BusMessageReader.readAll(message) else { return 0 }
        let signal = BusSignal(
            sender: sd_bus_message_get_sender(message).map { String(cString: $0) },
            path: sd_bus_message_get_path(message).map { String(cString: $0) } ?? "",
            interface: sd_bus_message_get_interface(message).map { String(cString: $0) } ?? "",
            member: sd_bus_message_get_member(message).map { String(cString: $0) } ?? "",
            arguments: arguments
        )
        box.handler(signal)
        return 0  // other matches see it too
    }

    private static func openBus(_ scope: BusConnection.Scope) throws(SystemdError) -> OpaquePointer {
        var bus: OpaquePointer?
        switch scope {
        case .system: try SystemdError.check(sd_bus_open_system(&bus), "connect to the system bus")
        case .user: try SystemdError.check(sd_bus_open_user(&bus), "connect to the user bus")
        }
        return bus!
    }

    private static func monotonicMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }

    private static func milliseconds(until: UInt64) -> Int32 {
        let now = self.monotonicMicroseconds()
        guard until > now else { return 0 }
        return Int32(clamping: (until - now + 999) / 1000)
    }
}

/// A signal subscription of a ``BusConnection``; ``cancel()`` removes its match.
public struct BusSubscription: Sendable {
    let connection: BusConnection
    let id: Int

    public func cancel() {
        self.connection.unsubscribe(self.id)
    }
}

/// A call waiting for its reply; retained by the bus's reply callback until it runs.
private final class CallBox: @unchecked Sendable {
    let operation: String
    private var continuation: CheckedContinuation<Result<[BusValue], SystemdError>, Never>?
    /// Set and read on the connection's thread only.
    weak var connection: BusConnection?

    init(operation: String, continuation: CheckedContinuation<Result<[BusValue], SystemdError>, Never>) {
        self.operation = operation
        self.continuation = continuation
    }

    /// Answers the caller; only the first answer counts (a lost bus and a late reply cannot both resume it).
    func finish(_ result: Result<[BusValue], SystemdError>) {
        self.continuation?.resume(returning: result)
        self.continuation = nil
    }
}

private final class SubscriptionBox: @unchecked Sendable {
    let handler: @Sendable (BusSignal) -> Void
    init(handler: @escaping @Sendable (BusSignal) -> Void) { self.handler = handler }
}

private func withOptionalCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let text else { return body(nil) }
    return text.withCString { body($0) }
}
