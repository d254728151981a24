import CoalesceCore
import CoalesceStore
import Foundation
import Logging
import Synchronization
import Varlink

/// The journal watches: the configuration's and those an administrator added at run time (kept in the store),
/// and the follower that reads the journal for them. The one place a watch is added, removed or listed.
final class JournalWatches: Sendable {
    private struct State {
        var settings: JournalSettings
        /// Added at run time, by name.
        var runtime: [WatchName: ConfiguredWatch] = [:]
        /// Where each watch added at run time began: where it begins again while it has no position yet.
        var starts: [WatchName: WatchStart] = [:]
    }

    private let state: Mutex<State>
    private let follower: JournalFollower?
    private let apps: AppManager
    private let store: Store
    private let logger: Logger

    /// Loads the watches added at run time from the store; a definition the daemon can no longer use is logged
    /// and left out (and left in the store, for a later version or RemoveWatch).
    init(settings: JournalSettings, apps: AppManager, store: Store, logger: Logger) {
        self.apps = apps
        self.store = store
        self.logger = logger
        var runtime: [WatchName: ConfiguredWatch] = [:]
        var starts: [WatchName: WatchStart] = [:]
        do {
            for row in try store.watchRows() {
                do {
                    guard case .object(let object)? = try? JSONParser.parse(Array(row.definition.utf8)) else {
                        throw WatchProblem(watch: row.name, reason: "its stored definition is not a JSON object")
                    }
                    let watch = try WatchDefinition.watch(from: object)
                    runtime[watch.name] = ConfiguredWatch(watch: watch, owner: row.owner, origin: .runtime)
                    starts[watch.name] = object["start"]?.stringValue.flatMap(WatchDefinition.start(parsing:))
                } catch {
                    logger.error("Journal watch left out: \(error)", metadata: ["watch": "\(row.name)"])
                }
            }
        } catch {
            logger.error("Cannot read the journal watches added at run time: \(error)")
        }
        self.state = Mutex(State(settings: settings, runtime: runtime, starts: starts))
        var follower: JournalFollower?
        if settings.follows {
            do {
                follower = try JournalFollower(apps: apps, store: store, settings: settings, logger: logger)
            } catch {
                logger.error("Journal watches are not followed: \(error)")
            }
        }
        self.follower = follower
    }

    /// Every watch followed: the configuration's, then those added at run time (one of a name the configuration
    /// took is left out).
    private static func all(_ state: State) -> [ConfiguredWatch] {
        let configured = state.settings.watches.map { ConfiguredWatch(watch: $0, owner: 0, origin: .configuration) }
        let names = Set(configured.map(\.name))
        return configured + state.runtime.values.filter { !names.contains($0.name) }.sorted { $0.name < $1.name }
    }

    func start() {
        let (watches, starts) = self.state.withLock { (Self.all($0), $0.starts) }
        self.warnOfUnknownTargets(watches)
        self.follower?.start(watches, starts: starts)
        // A watch no longer configured nor stored starts afresh if it comes back.
        self.store.forgetPositions(except: Set(watches.map(\.name.value)))
    }

    func stop() {
        self.follower?.stop()
    }

    /// Why the configuration's watches cannot be taken (a target no app answers to), or `nil`.
    func problem(with settings: JournalSettings) -> String? {
        for watch in settings.watches where self.apps.journalRecipients(watch.target, poster: VarlinkPeer(pid: 0, uid: 0, gid: 0)).isEmpty {
            return "[JournalWatch \(watch.name)]: \(Self.noTarget(watch.target))"
        }
        return nil
    }

    /// Follows the reloaded configuration's watches (checked with ``problem(with:)``).
    func reload(_ settings: JournalSettings) {
        let (watches, starts) = self.state.withLock { state in
            state.settings = settings
            return (Self.all(state), state.starts)
        }
        self.follower?.follow(watches, starts: starts)
    }

    /// How many watches a user who is not an administrator may add (``JournalSettings/userWatches``).
    var userWatches: Int { self.state.withLock { $0.settings.userWatches } }

    /// Adds a watch for `owner`, stored and followed from `start`. A user's watch (`owner` is not an administrator)
    /// takes only that user's own entries and posts only to an app the user owns.
    func add(_ definition: JSONObject, start: WatchStart, owner: VarlinkPeer, asUser: Bool = false) async throws(SystemError) {
        var watch: JournalWatch
        do {
            watch = try WatchDefinition.watch(from: definition)
        } catch {
            throw .invalidWatch(watch: error.watch, reason: error.reason)
        }
        if asUser { try self.restrictToUser(&watch, uid: owner.uid) }
        if self.apps.journalRecipients(watch.target, poster: owner).isEmpty {
            let rules = owner.uid == 0 ? "" : " (or its posters rules do not let uid \(owner.uid) post to it)"
            throw .invalidWatch(watch: watch.name.value, reason: Self.noTarget(watch.target) + rules)
        }
        let configured = ConfiguredWatch(watch: watch, owner: owner.uid, origin: .runtime)
        let refusal = self.state.withLock { state -> SystemError? in
            if state.settings.watches.contains(where: { $0.name == watch.name }) || state.runtime[watch.name] != nil {
                return .watchExists(watch: watch.name.value)
            }
            if state.settings.watches.count + state.runtime.count >= state.settings.maxWatches {
                return .invalidWatch(watch: watch.name.value, reason: "there are MaxWatches=\(state.settings.maxWatches) watches already")
            }
            if asUser, state.runtime.values.count(where: { $0.owner == owner.uid }) >= state.settings.userWatches {
                return .invalidWatch(
                    watch: watch.name.value, reason: "uid \(owner.uid) has UserWatches=\(state.settings.userWatches) watches already"
                )
            }
            state.runtime[watch.name] = configured  // taken now, so that a second add of the name is refused
            state.starts[watch.name] = start
            return nil
        }
        if let refusal { throw refusal }
        do {
            var definition = WatchDefinition.object(watch)
            definition["start"] = .string(WatchDefinition.text(of: start))
            let row = Store.WatchRow(name: watch.name.value, definition: JSONValue.object(definition).jsonText, owner: owner.uid)
            try await self.store.addWatch(row, from: nil)
        } catch {
            _ = self.state.withLock { $0.runtime.removeValue(forKey: watch.name) }
            throw .storageFailed(reason: "\(error)")
        }
        let (watches, starts) = self.state.withLock { (Self.all($0), $0.starts) }
        self.follower?.follow(watches, starts: starts)
        self.logger.notice(
            "Journal watch \(watch.name) added by uid \(owner.uid): \(Self.summary(watch))",
            metadata: ["watch": "\(watch.name)", "uid": "\(owner.uid)"]
        )
    }

    /// A user's watch: its target must be an app of the user's, and it takes the user's own entries only
    /// (`_UID=`, whatever else it matches).
    private func restrictToUser(_ watch: inout JournalWatch, uid: UInt32) throws(SystemError) {
        guard case .app(let app) = watch.target, self.apps.owner(of: app) == uid else {
            throw .invalidWatch(watch: watch.name.value, reason: "a user's watch posts to an app of its own, and \(watch.target) is not one of uid \(uid)'s")
        }
        if let uids = watch.selection.fields["_UID"], uids != [String(uid)] {
            throw .invalidWatch(watch: watch.name.value, reason: "a user's watch takes its own entries only: _UID=\(uid)")
        }
        watch.selection.fields["_UID"] = [String(uid)]
        // The forced match counts against the watch's bounds as any: a watch that passed them only without it would
        // be stored, and refused when read back at the next start.
        do { try watch.validate() } catch { throw .invalidWatch(watch: error.watch, reason: error.reason) }
    }

    /// Removes a watch added at run time; `user`: only if it is that user's.
    func remove(_ name: String, user: UInt32? = nil) async throws(SystemError) {
        guard let watchName = try? WatchName(name) else { throw .noSuchWatch(watch: name, reason: "no watch has that name") }
        let origin = self.state.withLock { state -> ConfiguredWatch.Origin? in
            if let watch = state.runtime[watchName], user == nil || watch.owner == user { return .runtime }
            if user != nil { return nil }
            return state.settings.watches.contains { $0.name == watchName } ? .configuration : nil
        }
        switch origin {
        case nil: throw .noSuchWatch(watch: name, reason: "no watch has that name")
        case .configuration?:
            throw .noSuchWatch(watch: name, reason: "it is the configuration's: remove its [JournalWatch \(name)] section and reload")
        case .runtime?: break
        }
        do {
            try await self.store.removeWatch(name)
        } catch {
            throw .storageFailed(reason: error.description)
        }
        let (watches, starts) = self.state.withLock { state in
            state.runtime[watchName] = nil
            state.starts[watchName] = nil
            return (Self.all(state), state.starts)
        }
        self.follower?.follow(watches, starts: starts)
        self.logger.notice("Journal watch \(name) removed", metadata: ["watch": "\(name)"])
    }

    /// Every watch with its figures, as ListWatches returns them; `user`: only that user's.
    func list(user: UInt32? = nil) -> [JSONValue] {
        let watches = self.state.withLock { Self.all($0) }.filter { user == nil || ($0.origin == .runtime && $0.owner == user) }
        let figures = self.follower?.figures.watches ?? [:]
        return watches.map { configured in
            var object = WatchDefinition.object(configured.watch)
            object["origin"] = .string(configured.origin.rawValue)
            object["owner"] = .int(Int64(configured.owner))
            let counts = figures[configured.name] ?? JournalFollower.WatchFigures()
            object["matched"] = .int(Int64(counts.matched))
            object["posts"] = .int(Int64(counts.posts))
            object["refused"] = .int(Int64(counts.refused))
            object["untested"] = .int(Int64(counts.untested))
            if let last = counts.lastMatched { object["lastMatched"] = .double(last) }
            return .object(object)
        }
    }

    /// What Stats shows of the journal.
    var statsJSON: JSONValue {
        let (count, follows) = self.state.withLock { (Self.all($0).count, $0.settings.follows) }
        var (reader, figures) = self.follower?.figures ?? (JournalFollower.ReaderFigures(), [:])
        if self.follower == nil {
            reader.reason = follows ? "the journal reader could not start (see the daemon's log)" : "[Journal] Follow=no"
        }
        var stats: JSONObject = [
            "followed": .bool(reader.running),
            "watches": .int(Int64(count)),
            "entriesRead": .int(Int64(reader.entriesRead)),
            "lagSec": .double(reader.lagSeconds),
            "rewinds": .int(Int64(reader.rewinds)),
            "matched": .int(Int64(figures.values.reduce(0) { $0 + $1.matched })),
            "posts": .int(Int64(figures.values.reduce(0) { $0 + $1.posts })),
            "untested": .int(Int64(figures.values.reduce(0) { $0 + $1.untested })),
        ]
        if let reason = reader.reason { stats["reason"] = .string(reason) }
        return .object(stats)
    }

    private func warnOfUnknownTargets(_ watches: [ConfiguredWatch]) {
        for configured in watches where self.apps.journalRecipients(configured.watch.target, poster: VarlinkPeer(pid: 0, uid: configured.owner, gid: 0)).isEmpty {
            self.logger.warning(
                "Journal watch \(configured.name): \(Self.noTarget(configured.watch.target)); its entries are posted once one registers",
                metadata: ["watch": "\(configured.name)"]
            )
        }
    }

    private static func noTarget(_ target: WatchTarget) -> String {
        switch target {
        case .app(let app): "no app \(app) is registered"
        case .topic(let topic): "no app subscribes to topic:\(topic)"
        }
    }

    static func summary(_ watch: JournalWatch) -> String {
        var parts: [String] = []
        if !watch.selection.units.isEmpty { parts.append("unit \(watch.selection.units.joined(separator: ","))") }
        if !watch.selection.userUnits.isEmpty { parts.append("user unit \(watch.selection.userUnits.joined(separator: ","))") }
        if !watch.selection.identifiers.isEmpty { parts.append("identifier \(watch.selection.identifiers.joined(separator: ","))") }
        if let priority = watch.selection.priority { parts.append("priority \(JournalSelection.priorityNames[priority]) or more urgent") }
        for field in watch.selection.fields.keys.sorted() { parts.append("\(field)=\(watch.selection.fields[field]!.joined(separator: "|"))") }
        if let pattern = watch.pattern { parts.append("message \(pattern)") }
        return (parts.isEmpty ? "every entry" : parts.joined(separator: ", ")) + " → \(watch.kind) to \(watch.target) (\(watch.policy.text))"
    }
}
