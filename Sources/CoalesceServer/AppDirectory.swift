import CoalesceCore
import NIOConcurrencyHelpers

/// Every registered app: its durable registration and its lifecycle.
final class AppDirectory: Sendable {
    /// One app as the System interface reports it.
    struct Snapshot: Sendable, Hashable {
        var registration: AppRegistration
        var state: AppState
    }

    private struct Record {
        var registration: AppRegistration
        var lifecycle: AppLifecycle<ContinuousClock.Instant>
    }

    private let file: AppRegistryFile
    private let records: NIOLockedValueBox<[AppName: Record]>

    /// Loads the registry from the state directory.
    init(stateDirectory: String) throws(AppRegistryFile.Failure) {
        self.file = AppRegistryFile(stateDirectory: stateDirectory)
        var records: [AppName: Record] = [:]
        for registration in try self.file.load() {
            records[registration.name] = Record(
                registration: registration,
                lifecycle: AppLifecycle(traits: registration.traits)
            )
        }
        self.records = NIOLockedValueBox(records)
    }

    var count: Int { self.records.withLockedValue { $0.count } }

    /// Registers an app for `uid`, or updates the declarations of one `uid` owns. The registry on disk is
    /// written before the change takes effect: a registration that was answered survives a crash.
    /// - Throws: ``AppError`` for a bad name, an app another user owns, or the `limit`; the storage failure
    ///   otherwise. Nothing changes when it throws.
    func register(
        name: String,
        traits: AppTraits,
        launchUnit: String?,
        uid: UInt32,
        limit: Int
    ) throws -> AppRegistration {
        let appName: AppName
        do { appName = try AppName(name) } catch { throw AppError(error) }
        return try self.records.withLockedValue { records in
            var registration = AppRegistration(name: appName, owner: uid, traits: traits, launchUnit: launchUnit)
            if let existing = records[appName] {
                guard existing.registration.mayBeActedFor(by: uid) else { throw AppError.notOwner(app: name) }
                registration.owner = existing.registration.owner
            } else if records.count >= limit {
                throw AppError.tooManyApps(limit: limit)
            }
            var updated = records.mapValues(\.registration)
            updated[appName] = registration
            try self.file.save(Array(updated.values))
            var lifecycle = records[appName]?.lifecycle ?? AppLifecycle(traits: traits)
            lifecycle.traits = traits
            records[appName] = Record(registration: registration, lifecycle: lifecycle)
            return registration
        }
    }

    /// Every app, by name.
    func list() -> [Snapshot] {
        self.records.withLockedValue { records in
            records.values.map { Snapshot(registration: $0.registration, state: $0.lifecycle.state) }
                .sorted { $0.registration.name < $1.registration.name }
        }
    }

    /// One app.
    /// - Throws: ``AppError/noSuchApp(app:)``.
    func get(_ name: String) throws(AppError) -> Snapshot {
        let appName: AppName
        do { appName = try AppName(name) } catch { throw AppError(error) }
        guard let record = self.records.withLockedValue({ $0[appName] }) else { throw .noSuchApp(app: name) }
        return Snapshot(registration: record.registration, state: record.lifecycle.state)
    }
}
