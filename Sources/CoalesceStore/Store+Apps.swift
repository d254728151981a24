public import CoalesceCore
import GRDB

// The apps' rows: registrations and their declarations, the states they were last in, and what they saved.
extension Store {
    // MARK: Apps

    /// Every registered app, with its event declarations (JSON the daemon reads).
    public func apps() throws(StoreError) -> [(registration: AppRegistration, declarations: String)] {
        try self.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT name, owner, backgroundModes, exitsOnSuspend, launchUnit, suspension, declarations, windowIds,
                        urlSchemes, mimeTypes
                    FROM app ORDER BY name
                    """
            ).map { row in
                let name: String = row["name"]
                let modes: String = row["backgroundModes"]
                var registration = AppRegistration(
                    name: try AppName(name),
                    owner: UInt32(truncatingIfNeeded: row["owner"] as Int64),
                    traits: AppTraits(
                        backgroundModes: Set(modes.split(separator: "\n").map(String.init)),
                        exitsOnSuspend: row["exitsOnSuspend"]
                    ),
                    launchUnit: row["launchUnit"]
                )
                let windowIDs: String = row["windowIds"]
                registration.windowIDs = Set(windowIDs.split(separator: "\n").map(String.init))
                let schemes: String = row["urlSchemes"]
                let types: String = row["mimeTypes"]
                registration.opens = URLHandlers.Opens(
                    schemes: Set(schemes.split(separator: "\n").map(String.init)),
                    types: Set(types.split(separator: "\n").map(String.init))
                )
                if let mode: String = row["suspension"] {
                    // A value this version does not know reads as the configuration's, rather than failing the start.
                    registration.suspension = SuspensionMode(rawValue: mode)
                }
                return (registration, row["declarations"] as String)
            }
        }
    }

    /// Registers or updates an app with its event declarations (JSON the daemon reads); on disk when this returns.
    public func save(_ registration: AppRegistration, declarations: String = "{}") async throws(StoreError) {
        try await self.write { transaction in try Self.upsert(registration, declarations: declarations, transaction) }.wait()
    }

    /// Registers many apps in one transaction (an import).
    public func save(all registrations: [AppRegistration]) async throws(StoreError) {
        try await self.write { transaction in
            for registration in registrations { try Self.upsert(registration, declarations: "{}", transaction) }
        }.wait()
    }

    private static func upsert(_ registration: AppRegistration, declarations: String, _ transaction: StoreTransaction) throws {
        try transaction.run(
            """
                INSERT INTO app (name, owner, backgroundModes, exitsOnSuspend, launchUnit, suspension, declarations, windowIds,
                    urlSchemes, mimeTypes)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(name) DO UPDATE SET owner = excluded.owner, backgroundModes = excluded.backgroundModes,
                    exitsOnSuspend = excluded.exitsOnSuspend, launchUnit = excluded.launchUnit,
                    suspension = excluded.suspension, declarations = excluded.declarations, windowIds = excluded.windowIds,
                    urlSchemes = excluded.urlSchemes, mimeTypes = excluded.mimeTypes
                """,
            [
                registration.name.value, Int64(registration.owner),
                registration.traits.backgroundModes.sorted().joined(separator: "\n"),
                registration.traits.exitsOnSuspend, registration.launchUnit, registration.suspension?.rawValue,
                declarations, registration.windowIDs.sorted().joined(separator: "\n"),
                registration.opens.schemes.sorted().joined(separator: "\n"),
                registration.opens.types.sorted().joined(separator: "\n"),
            ]
        )
    }

    // MARK: App states

    /// The state an app was last in, and the process that ran it (its pid and ``ProcessHandle/identity``).
    public struct RecordedState: Sendable, Hashable {
        public var state: AppState
        public var interrupted: Bool
        public var pid: Int32?
        public var process: String?

        public init(state: AppState, interrupted: Bool = false, pid: Int32? = nil, process: String? = nil) {
            self.state = state
            self.interrupted = interrupted
            self.pid = pid
            self.process = process
        }
    }

    /// The recorded state of every app that was running when it was last written.
    /// - Throws: ``StoreError`` for a state this daemon does not know: the store is damaged.
    public func runningStates() throws(StoreError) -> [AppName: RecordedState] {
        let rows = try self.read { db in
            try Row.fetchAll(db, sql: "SELECT name, state, interrupted, pid, process FROM app WHERE state != 'notRunning'")
        }
        var states: [AppName: RecordedState] = [:]
        for row in rows {
            let name: String = row["name"]
            let stateName: String = row["state"]
            guard let app = try? AppName(name), let state = AppState(rawValue: stateName) else {
                throw StoreError.damaged(path: self.path, what: "app \(name) has the state \(stateName)")
            }
            let pid: Int64? = row["pid"]
            states[app] = RecordedState(
                state: state, interrupted: row["interrupted"], pid: pid.flatMap { Int32(exactly: $0) }, process: row["process"]
            )
        }
        return states
    }

    /// Records the state the app is in now. Unhurried and not waited for (it goes with the next write, or within a
    /// tenth of a second); of the states one batch records for an app only the last is written. A crash loses at
    /// most that tenth of a second of an app's states: the one recorded before is taken up.
    public func record(_ state: RecordedState, of app: AppName) {
        self.commits.submit(StateWrite(app: app, state: state), unhurried: true)
    }

    // MARK: Saved state

    /// What the app last saved, if anything.
    public func savedState(of app: AppName) throws(StoreError) -> String? {
        try self.read { db in try String.fetchOne(db, sql: "SELECT data FROM savedState WHERE app = ?", arguments: [app.value]) }
    }

    /// What every app saved for its scenes, oldest save first.
    public func sceneStates() throws(StoreError) -> [(app: String, scene: String, data: String)] {
        try self.read { db in
            try Row.fetchAll(db, sql: "SELECT app, scene, data FROM sceneState ORDER BY rowid").map { ($0["app"], $0["scene"], $0["data"]) }
        }
    }

    /// Keeps `data` for one of the app's scenes, or forgets what it kept (`nil`), and forgets what it kept for
    /// `forgetting` (past the number an app keeps); on disk when this returns.
    public func saveSceneState(of app: AppName, scene: String, _ data: String?, forgetting: String? = nil) async throws(StoreError) {
        try await self.write { transaction in
            // Deleted first, so that a save is inserted anew and comes last in rowid order.
            try transaction.run("DELETE FROM sceneState WHERE app = ? AND scene = ?", [app.value, scene])
            if let data { try transaction.run("INSERT INTO sceneState (app, scene, data) VALUES (?, ?, ?)", [app.value, scene, data]) }
            if let forgetting { try transaction.run("DELETE FROM sceneState WHERE app = ? AND scene = ?", [app.value, forgetting]) }
        }.wait()
    }

    /// Keeps `data` for the app, or forgets what it kept; on disk when this returns.
    public func saveState(of app: AppName, _ data: String?) async throws(StoreError) {
        try await self.write { transaction in
            if let data {
                try transaction.run(
                    "INSERT INTO savedState (app, data) VALUES (?, ?) ON CONFLICT(app) DO UPDATE SET data = excluded.data",
                    [app.value, data]
                )
            } else {
                try transaction.run("DELETE FROM savedState WHERE app = ?", [app.value])
            }
        }.wait()
    }
}
