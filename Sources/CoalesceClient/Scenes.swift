import Varlink

/// One of the app's scenes (UIKit's `UIScene`): a window of it that the user's session shows, followed by the
/// session's screen agent.
public struct Scene: Sendable, Hashable {
    /// The window's id where it comes from (sway's container id, an X11 window id): the scene's id within the app.
    /// The same id connecting again is the same scene restored.
    public var id: String

    public init(id: String) {
        self.id = id
    }
}

/// What `scene.willConnect` hands the app.
public struct SceneConnectionOptions: Sendable, Hashable {
    /// Who reports the window: `wayland` or `x11`.
    public var source: String
    /// What the app last kept for this scene with ``CoalescedApp/saveSceneState(_:for:)``, if anything: UIKit's
    /// state restoration activity.
    public var restoredState: String?
    /// The window's title as it connects (empty when it has none): which of the app's windows the scene is.
    public var title: String

    public init(source: String, restoredState: String? = nil, title: String = "") {
        self.source = source
        self.restoredState = restoredState
        self.title = title
    }
}

/// The app's side of its scenes' lifecycle, after UIKit's scene delegate: an ``AppDelegate``'s
/// ``AppDelegate/sceneDelegate`` gets each scene's callbacks, in the order the daemon sent them.
///
/// A scene connects (``scene(_:willConnectWith:in:)``), comes to the foreground as its window is shown, becomes
/// active as it is focused, resigns and goes to the background as the focus moves away or the window is hidden, and
/// disconnects as the window closes. The app's own callbacks come around them: the app enters the foreground before
/// its first scene does, and leaves it after its last.
public protocol SceneDelegate: Sendable {
    func scene(_ scene: Scene, willConnectWith options: SceneConnectionOptions, in app: CoalescedApp) async
    func sceneWillEnterForeground(_ scene: Scene, in app: CoalescedApp) async
    func sceneDidBecomeActive(_ scene: Scene, in app: CoalescedApp) async
    func sceneWillResignActive(_ scene: Scene, in app: CoalescedApp) async
    func sceneDidEnterBackground(_ scene: Scene, in app: CoalescedApp) async
    /// The window closed: the scene is gone. What it should find when it connects again, save with
    /// ``CoalescedApp/saveSceneState(_:for:)`` before this (in ``sceneDidEnterBackground(_:in:)``).
    func sceneDidDisconnect(_ scene: Scene, in app: CoalescedApp) async
}

extension SceneDelegate {
    public func scene(_ scene: Scene, willConnectWith options: SceneConnectionOptions, in app: CoalescedApp) async {}
    public func sceneWillEnterForeground(_ scene: Scene, in app: CoalescedApp) async {}
    public func sceneDidBecomeActive(_ scene: Scene, in app: CoalescedApp) async {}
    public func sceneWillResignActive(_ scene: Scene, in app: CoalescedApp) async {}
    public func sceneDidEnterBackground(_ scene: Scene, in app: CoalescedApp) async {}
    public func sceneDidDisconnect(_ scene: Scene, in app: CoalescedApp) async {}

    /// Calls the method for a scene's delivery, and does nothing for any other: for an ``AppDelegate`` that handles
    /// deliveries itself (``AppDelegate/app(_:handle:)``) and hands scenes on.
    public func handle(_ delivery: Delivery, in app: CoalescedApp) async {
        switch delivery {
        case .sceneWillConnect(let scene, let options): await self.scene(scene, willConnectWith: options, in: app)
        case .sceneWillEnterForeground(let scene): await self.sceneWillEnterForeground(scene, in: app)
        case .sceneDidBecomeActive(let scene): await self.sceneDidBecomeActive(scene, in: app)
        case .sceneWillResignActive(let scene): await self.sceneWillResignActive(scene, in: app)
        case .sceneDidEnterBackground(let scene): await self.sceneDidEnterBackground(scene, in: app)
        case .sceneDidDisconnect(let scene): await self.sceneDidDisconnect(scene, in: app)
        default: break
        }
    }
}

extension Received {
    /// A scene's callback as its delivery; `nil` for a `scene.` kind this library does not know.
    static func scene(_ kind: Substring, _ callback: JSONValue) -> Delivery? {
        guard let id = callback["scene"]?.stringValue else { return nil }
        let scene = Scene(id: id)
        switch kind {
        case "willConnect":
            return .sceneWillConnect(
                scene,
                SceneConnectionOptions(
                    source: callback["source"]?.stringValue ?? "",
                    restoredState: callback["restoredState"]?.stringValue,
                    title: callback["title"]?.stringValue ?? ""
                )
            )
        case "willEnterForeground": return .sceneWillEnterForeground(scene)
        case "didBecomeActive": return .sceneDidBecomeActive(scene)
        case "willResignActive": return .sceneWillResignActive(scene)
        case "didEnterBackground": return .sceneDidEnterBackground(scene)
        case "didDisconnect": return .sceneDidDisconnect(scene)
        default: return nil
        }
    }
}
