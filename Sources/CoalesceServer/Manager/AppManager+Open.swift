import CoalesceCore
import CoalesceWire
import Logging
import Synchronization
import Systemd
import Varlink

/// Opening a URL with an app (App.Open, `coalescectl open`): which app opens it (``URLHandlers``), the URL kept as its
/// `lifecycle.openURL` event, and the app launched, brought forward or woken for it.
extension AppManager {
    static let openURL = EventKind(daemonKind: "lifecycle.openURL")

    /// What Open did: the app that opens the URL, as it is now, and whether it is being launched for it.
    struct Opened: Sendable {
        var snapshot: Snapshot
        var launching: Bool
    }

    /// Opens `opened` with the app that handles it among those its opener's uid may act for (root: every app): the
    /// one `named`, or the only one. Replies once the URL is kept: a running app has it at once; a suspended one is
    /// brought forward (`background`: woken into the background) and has it after its callbacks; a stopped one is
    /// launched with it in its launch options, and has it after its launch's callbacks. An opener who is no
    /// administrator (`admin`) brings the app forward only when every app on screen is its own.
    /// - Parameter desktopDirectories: where desktop files are looked for (``DesktopFiles``).
    func open(
        _ opened: OpenedURL,
        target: URLHandlers.Target,
        named: String?,
        background: Bool,
        admin: Bool = false,
        desktopDirectories: [String]
    ) async throws(AppError) -> Opened {
        let named = try named.map { name throws(AppError) in try Self.appName(name) }
        // Who may be asked, with what each declared; their desktop files are read after, off the lock.
        let candidates = self.state.withLock { state in
            state.records.values.compactMap { record -> AppRegistration? in
                record.registration.mayBeActedFor(by: opened.opener) ? record.registration : nil
            }
        }
        var opens: [AppName: URLHandlers.Opens] = [:]
        for registration in candidates {
            let ids = [registration.name.value] + registration.windowIDs.sorted()
            opens[registration.name] = registration.opens.union(DesktopFiles.opens(ids: ids, in: desktopDirectories))
        }
        let appName: AppName
        switch URLHandlers.choose(target, among: opens, named: named) {
        case .app(let chosen): appName = chosen
        case .none(let named?) where opens[named] == nil:
            throw .noHandler(url: opened.url, reason: "no app \(named) that uid \(opened.opener) may open URLs with")
        case .none(let named?):
            throw .noHandler(url: opened.url, reason: "\(named) does not declare \(target) (Register's urlSchemes, mimeTypes)")
        case .none(nil):
            throw .noHandler(url: opened.url, reason: "no app of uid \(opened.opener) declares \(target)")
        case .several(let apps):
            throw .ambiguousHandler(url: opened.url, apps: apps.map(\.value))
        }
        let held = self.state.withLock { state -> Int? in
            guard let record = state.records[appName], record.lifecycle.state == .notRunning, record.lifecycle.launchesHeld
            else { return nil }
            return record.lifecycle.failedLaunches.inARow
        }
        if let held { throw .launchesHeld(app: appName.value, failed: held) }

        let payload = JSONValue.object(OpenedURLForm.wire(opened))
        let kept = await withCheckedContinuation { (continuation: CheckedContinuation<AppError?, Never>) in
            let taken = self.postFromDaemon(appName, kind: Self.openURL, payload: payload) { _, failure in
                continuation.resume(returning: failure.map(Self.notKept))
            }
            if !taken { continuation.resume(returning: .noHandler(url: opened.url, reason: "\(appName) is no longer registered")) }
        }
        if let kept { throw kept }
        self.logger.notice(
            "\(appName): a URL was opened with it",
            metadata: [
                "app": "\(appName)", "url_scheme": "\(target.scheme)", "uid": "\(opened.opener)",
                "message_id": "\(MessageID.urlOpened)",
            ]
        )
        // Only an administrator, or the user whose apps are all that is on screen, takes the foreground from what is
        // there: another user's URL goes to its app in the background.
        let mayComeForward = admin || self.state.withLock { state in
            state.onScreen.allSatisfy { state.records[$0]?.registration.owner == opened.opener }
        }
        let launching = self.bringUp(appName, for: opened, background: background || !mayComeForward)
        let snapshot = self.state.withLock { $0.records[appName]?.snapshot }
        guard let snapshot else { throw .noHandler(url: opened.url, reason: "\(appName) is no longer registered") }
        return Opened(snapshot: snapshot, launching: launching)
    }

    /// Where the app goes for a URL: launched (in a task: its launch goes on after the reply), brought forward, or
    /// woken into the background. Returns whether it is being launched.
    private func bringUp(_ appName: AppName, for opened: OpenedURL, background: Bool) -> Bool {
        let current = self.state.withLock { state in state.records[appName]?.lifecycle.state }
        switch current {
        case .notRunning?:
            // A launch already waiting is joined: where it goes and why are this one's.
            Task {
                do {
                    _ = try await self.launch(
                        name: appName.value, destination: background ? .background : .foreground, reason: .url(opened)
                    )
                } catch {
                    self.logger.warning(
                        "\(appName): could not launch it for a URL",
                        metadata: ["app": "\(appName)", "reason": "\(error)"]
                    )
                }
            }
            return true
        case .suspended? where background:
            self.wakeIntoBackground(appName, reason: .openURL)
        case .background? where !background, .suspended? where !background, .inactive? where !background:
            do {
                _ = try self.activate(name: appName.value)
            } catch {
                // An interrupted app stays inactive until its interruption ends; the URL is its already.
                self.logger.info("\(appName): not brought forward for a URL: \(error)", metadata: ["app": "\(appName)"])
            }
        default:
            break
        }
        return false
    }

    /// The URL's event the app's inbox did not keep, as Open's caller hears it.
    private static func notKept(_ failure: any Error) -> AppError {
        if let refusal = failure as? PostRefusal, case .overQuota(let quota) = refusal { return .quotaExceeded(quota) }
        return .storageFailed(reason: "\(failure)")
    }
}

/// Desktop files (the Desktop Entry Specification), read for what an app opens (`MimeType=`): `ID.desktop` under
/// each data directory's `applications`, the first found winning, as the specification orders them.
enum DesktopFiles {
    /// The data directories: `$XDG_DATA_HOME` (a user's daemon), then `$XDG_DATA_DIRS` or its default.
    static func directories(userInstance: Bool) -> [String] {
        var directories: [String] = []
        if userInstance {
            if let home = ProcessEnvironment.value("XDG_DATA_HOME"), home.hasPrefix("/") {
                directories.append(home)
            } else if let home = ProcessEnvironment.value("HOME"), home.hasPrefix("/") {
                directories.append(home + "/.local/share")
            }
        }
        let dirs = ProcessEnvironment.value("XDG_DATA_DIRS").flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share"
        directories += dirs.split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
        return directories
    }

    /// What the first desktop file of the first of `ids` found opens; nothing where there is none.
    static func opens(ids: [String], in directories: [String]) -> URLHandlers.Opens {
        for id in ids where !id.contains("/") {
            for directory in directories {
                guard let bytes = try? ReadableFile.contents(of: "\(directory)/applications/\(id).desktop", limit: 1 << 20) else {
                    continue
                }
                return URLHandlers.desktopMIMETypes(String(decoding: bytes, as: UTF8.self)).map(URLHandlers.Opens.init(desktopMIMETypes:))
                    ?? URLHandlers.Opens()
            }
        }
        return URLHandlers.Opens()
    }
}
