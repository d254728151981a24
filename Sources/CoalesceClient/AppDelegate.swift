/// The app's side of its lifecycle, after UIKit's application delegate, for ``CoalescedApp/run(delegate:)`` and
/// for ``CoalescedApp`` as a `Service`.
///
/// Every method has a default that does nothing; an app implements those it cares about. They are called one at
/// a time, in the order the daemon sent the callbacks, and each callback is acknowledged when its method returns.
public protocol AppDelegate: Sendable {
    /// The launch has begun; didFinishLaunching follows, with the same options.
    func app(_ app: CoalescedApp, willFinishLaunchingWith options: LaunchOptions) async
    func app(_ app: CoalescedApp, didFinishLaunchingWith options: LaunchOptions) async
    func appDidBecomeActive(_ app: CoalescedApp) async
    func appWillResignActive(_ app: CoalescedApp) async
    func appDidEnterBackground(_ app: CoalescedApp) async
    func appWillEnterForeground(_ app: CoalescedApp) async
    /// The last callback: ``CoalescedApp/run(delegate:)`` returns after it, and the process should exit.
    func appWillTerminate(_ app: CoalescedApp) async
    /// A background task's time is nearly up: end it.
    func app(_ app: CoalescedApp, backgroundTaskWillExpire task: BackgroundTask) async
    /// The time a wake into the background gave the app is nearly up (``Delivery/backgroundTimeWillExpire``).
    func appBackgroundTimeWillExpire(_ app: CoalescedApp) async
    /// An event posted to the app.
    func app(_ app: CoalescedApp, didReceive event: Event) async
    /// A URL was opened with the app (UIKit's `application(_:open:options:)`).
    func app(_ app: CoalescedApp, open url: OpenedURL) async
    /// One of its scheduled refreshes came due: its work, then ``CoalescedApp/refreshDone(_:success:)``.
    func app(_ app: CoalescedApp, performRefresh refresh: BackgroundRefresh) async
    /// One of the app's notifications fired while it is active (otherwise the desktop presents it).
    func app(_ app: CoalescedApp, willPresent presentation: NotificationPresentation) async
    /// The user answered one of the app's notifications.
    func app(_ app: CoalescedApp, didReceive response: NotificationResponse) async
    /// Who hears the app's scenes' callbacks (its windows'); `nil` (the default): nobody.
    var sceneDelegate: (any SceneDelegate)? { get }
    /// Every delivery; its default calls the methods above and the ``sceneDelegate``'s, and ignores the other
    /// callbacks (didReceiveMemoryWarning, significantTimeChange, protectedData…).
    func app(_ app: CoalescedApp, handle delivery: Delivery) async
}

extension AppDelegate {
    public func app(_ app: CoalescedApp, willFinishLaunchingWith options: LaunchOptions) async {}
    public func app(_ app: CoalescedApp, didFinishLaunchingWith options: LaunchOptions) async {}
    public func appDidBecomeActive(_ app: CoalescedApp) async {}
    public func appWillResignActive(_ app: CoalescedApp) async {}
    public func appDidEnterBackground(_ app: CoalescedApp) async {}
    public func appWillEnterForeground(_ app: CoalescedApp) async {}
    public func appWillTerminate(_ app: CoalescedApp) async {}
    public func app(_ app: CoalescedApp, backgroundTaskWillExpire task: BackgroundTask) async {}
    public func appBackgroundTimeWillExpire(_ app: CoalescedApp) async {}
    public func app(_ app: CoalescedApp, didReceive event: Event) async {}
    public func app(_ app: CoalescedApp, open url: OpenedURL) async {}
    public func app(_ app: CoalescedApp, performRefresh refresh: BackgroundRefresh) async {}
    public func app(_ app: CoalescedApp, willPresent presentation: NotificationPresentation) async {}
    public func app(_ app: CoalescedApp, didReceive response: NotificationResponse) async {}
    public var sceneDelegate: (any SceneDelegate)? { nil }

    public func app(_ app: CoalescedApp, handle delivery: Delivery) async {
        switch delivery {
        case .willFinishLaunching(let options): await self.app(app, willFinishLaunchingWith: options)
        case .didFinishLaunching(let options): await self.app(app, didFinishLaunchingWith: options)
        case .didBecomeActive: await self.appDidBecomeActive(app)
        case .willResignActive: await self.appWillResignActive(app)
        case .didEnterBackground: await self.appDidEnterBackground(app)
        case .willEnterForeground: await self.appWillEnterForeground(app)
        case .willTerminate: await self.appWillTerminate(app)
        case .backgroundTaskWillExpire(let task): await self.app(app, backgroundTaskWillExpire: task)
        case .backgroundTimeWillExpire: await self.appBackgroundTimeWillExpire(app)
        case .event(let event): await self.app(app, didReceive: event)
        case .openURL(let url): await self.app(app, open: url)
        case .backgroundRefresh(let refresh): await self.app(app, performRefresh: refresh)
        case .willPresent(let presentation): await self.app(app, willPresent: presentation)
        case .didReceiveResponse(let response): await self.app(app, didReceive: response)
        case .sceneWillConnect, .sceneWillEnterForeground, .sceneDidBecomeActive, .sceneWillResignActive,
            .sceneDidEnterBackground, .sceneDidDisconnect:
            await self.sceneDelegate?.handle(delivery, in: app)
        case .didReceiveMemoryWarning, .significantTimeChange, .protectedDataWillBecomeUnavailable,
            .protectedDataDidBecomeAvailable:
            break
        }
    }
}
