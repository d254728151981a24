import CoalesceCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization
import Systemd
import CoalesceStore
import Varlink

/// The registry: apps registered, their declarations, looked up.
extension AppManager {
    // MARK: Registry

    /// Registers an app for `uid`, or updates the declarations of one `uid` owns. The reply waits for the store's
    /// commit: a registration that was answered survives a crash.
    ///
    /// The change is made in memory first, so that a concurrent registration of the same new name by another user
    /// is refused at once (the first one owns it), and undone if the store cannot keep it.
    /// - Parameter admin: the kernel says `uid` is an administrator (its apps have the administrators' quotas).
    /// - Throws: ``AppError`` for a bad name, an app another user owns, the `limit`, the owner's quota, or storage.
    func register(
        name: String,
        traits: AppTraits,
        launchUnit: LaunchUnitChange,
        suspension: SuspensionChange = .keep,
        windowIDs: Set<String>? = nil,
        opens: (schemes: Set<String>?, types: Set<String>?) = (nil, nil),
        declarations given: EventDeclarations,
        keeping: (kinds: Bool, posters: Bool, topics: Bool) = (false, false, false),
        uid: UInt32,
        admin: Bool = false,
        limit: Int
    ) async throws(AppError) -> Snapshot {
        let appName = try Self.appName(name)
        let (registration, previous, previousDeclarations, declarations) = try self.state.withLock { state throws(AppError) in
            let previous = state.records[appName]
            let unit: String?
            switch launchUnit {
            case .keep: unit = previous?.registration.launchUnit
            case .clear: unit = nil
            case .set(let chosen, let byAdmin):
                // systemd starts the unit at root's request: only an admin may choose which.
                guard byAdmin || chosen == previous?.registration.launchUnit else {
                    throw .launchUnitNotAllowed(app: name, unit: chosen)
                }
                unit = chosen
            }
            var registration = AppRegistration(name: appName, owner: uid, traits: traits, launchUnit: unit)
            switch suspension {
            case .keep: registration.suspension = previous?.registration.suspension
            case .set(let mode): registration.suspension = mode
            }
            registration.windowIDs = windowIDs ?? previous?.registration.windowIDs ?? []
            registration.opens = URLHandlers.Opens(
                schemes: opens.schemes ?? previous?.registration.opens.schemes ?? [],
                types: opens.types ?? previous?.registration.opens.types ?? []
            )
            if let previous {
                guard previous.registration.mayBeActedFor(by: uid) else { throw .notOwner(app: name) }
                registration.owner = previous.registration.owner
            } else if state.records.count >= limit {
                throw .tooManyApps(limit: limit)
            } else {
                let account = state.ledger.account(of: uid)
                if admin { account.admin = true }
                let quota = state.ledger.appsQuota(of: account)
                guard account.apps < quota.limit else { throw .quotaExceeded(quota) }
            }
            // What a registration leaves out, it keeps from the one before.
            var declarations = given
            if keeping.kinds, let previous { declarations.kinds = previous.declarations.kinds }
            if keeping.posters, let previous { declarations.posters = previous.declarations.posters }
            if keeping.topics, let previous { declarations.topics = previous.declarations.topics }
            // Declared now or kept from before: a kind can only wake the app into a mode it declares.
            if let (kind, mode) = declarations.undeclaredMode(among: traits.backgroundModes) {
                throw .backgroundModeNotDeclared(app: name, kind: kind.value, mode: mode)
            }
            self.apply(registration, declarations, in: &state)
            return (registration, previous?.registration, previous?.declarations, declarations)
        }
        do {
            try await self.store.save(registration, declarations: declarations.json.jsonText)
            self.writes.report("app registrations", nil)
        } catch {
            self.writes.report("app registrations", error)
            self.state.withLock { state in
                guard state.records[appName]?.registration == registration else { return }
                if let previous {
                    self.apply(previous, previousDeclarations ?? EventDeclarations(), in: &state)
                } else if state.records[appName]?.lifecycle.state == .notRunning {
                    for topic in declarations.topics { state.subscribers[topic]?.remove(appName) }
                    for id in registration.windowIDs { state.windowApps[id]?.remove(appName) }
                    state.records[appName]?.account.apps -= 1
                    state.records[appName] = nil
                    state.counts[.notRunning, default: 0] -= 1
                }
            }
            throw .storageFailed(reason: error.description)
        }
        return try self.state.withLock { state throws(AppError) in
            guard let record = state.records[appName] else { throw .storageFailed(reason: "registration undone") }
            return record.snapshot
        }
    }

    func apply(_ registration: AppRegistration, _ declarations: EventDeclarations, in state: inout State) {
        if state.records[registration.name] == nil {
            state.counts[.notRunning, default: 0] += 1
            state.ledger.account(of: registration.owner).apps += 1
        }
        var record =
            state.records[registration.name]
            ?? Record(
                registration: registration,
                lifecycle: AppLifecycle(
                    traits: registration.traits,
                    timings: self.daemon.configuration.timings,
                    firstSequence: self.firstSequence,
                    earliestSequence: Self.earliestSequence
                ),
                since: self.wall(),
                inbox: AppInbox(kindLimit: self.daemon.configuration.maxKindsPerApp),
                account: state.ledger.account(of: registration.owner)
            )
        for topic in record.declarations.topics.subtracting(declarations.topics) {
            state.subscribers[topic]?.remove(registration.name)
        }
        for topic in declarations.topics { state.subscribers[topic, default: []].insert(registration.name) }
        for id in record.registration.windowIDs.subtracting(registration.windowIDs) {
            state.windowApps[id]?.remove(registration.name)
            if state.windowApps[id]?.isEmpty == true { state.windowApps[id] = nil }
        }
        for id in registration.windowIDs { state.windowApps[id, default: []].insert(registration.name) }
        record.registration = registration
        record.declarations = declarations
        record.lifecycle.traits = registration.traits
        state.records[registration.name] = record
    }

    /// Every app, by name.
    func list() -> [Snapshot] {
        self.state.withLock { state in
            state.records.values.map(\.snapshot).sorted { $0.registration.name < $1.registration.name }
        }
    }

    /// One app, for the System side.
    /// - Throws: ``SystemError/noSuchApp(app:)``.
    func get(_ name: String) throws(SystemError) -> Snapshot {
        let appName = try Self.systemAppName(name)
        guard let record = self.state.withLock({ $0.records[appName] }) else { throw .noSuchApp(app: name) }
        return record.snapshot
    }

    /// One app, with what it declared of its events: kinds, posters, topics.
    /// - Throws: ``SystemError/noSuchApp(app:)``.
    func declared(_ name: String) throws(SystemError) -> (Snapshot, EventDeclarations) {
        let appName = try Self.systemAppName(name)
        guard let found = self.state.withLock({ state in state.records[appName].map { ($0.snapshot, $0.declarations) } })
        else { throw .noSuchApp(app: name) }
        return found
    }
}

/// What a registration does to the app's launch unit.
enum LaunchUnitChange: Sendable {
    /// Left out: as before.
    case keep
    /// An empty name: none.
    case clear
    /// A unit, and whether the caller is an admin (only an admin may choose a new one).
    case set(String, byAdmin: Bool)
}
