@testable import CoalesceScreenAgent
import Testing
import Varlink

/// The X11 session's windows as the agent reads them from EWMH's and ICCCM's properties, and the hold on a None
/// read of `_NET_ACTIVE_WINDOW`, on values alone (the real X server: ScreenAgentX11Tests).
@Suite struct X11ScreenTests {
    static let hidden: UInt32 = 301
    static let maximized: UInt32 = 302

    static func client(
        _ window: UInt32,
        _ appID: String? = "org.example.mail",
        title: String = "Inbox",
        states: [UInt32] = [],
        desktop: UInt32? = 0,
        wmState: UInt32? = 1,
        pid: Int32? = 42
    ) -> X11Screen.Client {
        X11Screen.Client(window: window, appID: appID, title: title, states: states, desktop: desktop, wmState: wmState, pid: pid)
    }

    static func presentations(_ screen: X11Screen) -> [String] {
        screen.windows.map { "\($0.id) \($0.presentation.rawValue)" }
    }

    @Test func theActiveWindowIsFocusedAndTheOthersOnTheDesktopShown() {
        let screen = X11Screen(
            clients: [Self.client(0x60_0001), Self.client(0x60_0002, "org.example.maps", title: "Map")],
            active: 0x60_0002, currentDesktop: 0, hiddenState: Self.hidden
        )
        #expect(screen.windows.map(Optional.some) == [
            SessionWindow(id: "0x00600001", appID: "org.example.mail", pid: 42, presentation: .shown, title: "Inbox"),
            SessionWindow(id: "0x00600002", appID: "org.example.maps", pid: 42, presentation: .focused, title: "Map"),
        ])
    }

    /// Hidden: minimized (openbox sets both), on another desktop (openbox sets only WM_STATE Iconic there), or
    /// iconic alone; a window on every desktop, or with no desktop, is on this one.
    @Test(arguments: [
        (X11ScreenTests.client(1, states: [X11ScreenTests.maximized, X11ScreenTests.hidden], wmState: 3), "hidden"),
        (X11ScreenTests.client(1, states: [X11ScreenTests.hidden]), "hidden"),
        (X11ScreenTests.client(1, desktop: 1, wmState: 3), "hidden"),
        (X11ScreenTests.client(1, desktop: 1), "hidden"),
        (X11ScreenTests.client(1, wmState: 3), "hidden"),
        (X11ScreenTests.client(1, states: [X11ScreenTests.maximized]), "focused"),
        (X11ScreenTests.client(1, desktop: 0xFFFF_FFFF), "focused"),
        (X11ScreenTests.client(1, desktop: nil, wmState: nil), "focused"),
        (X11ScreenTests.client(2), "shown"),
    ])
    func presentation(of client: X11Screen.Client, is expected: String) {
        let screen = X11Screen(clients: [client], active: 1, currentDesktop: 0, hiddenState: Self.hidden)
        #expect(screen.windows.map(\.presentation.rawValue) == [expected])
    }

    @Test func theCurrentDesktopDecidesWhichWindowsAreShown() {
        let clients = [Self.client(1, desktop: 0), Self.client(2, desktop: 1), Self.client(3, desktop: 0xFFFF_FFFF)]
        let onFirst = X11Screen(clients: clients, active: nil, currentDesktop: 0, hiddenState: Self.hidden)
        #expect(Self.presentations(onFirst) == ["0x00000001 shown", "0x00000002 hidden", "0x00000003 shown"])
        let onSecond = X11Screen(clients: clients, active: 2, currentDesktop: 1, hiddenState: Self.hidden)
        #expect(Self.presentations(onSecond) == ["0x00000001 hidden", "0x00000002 focused", "0x00000003 shown"])
        // No _NET_CURRENT_DESKTOP: the desktops say nothing.
        let unknown = X11Screen(clients: clients, active: nil, currentDesktop: nil, hiddenState: Self.hidden)
        #expect(Self.presentations(unknown) == ["0x00000001 shown", "0x00000002 shown", "0x00000003 shown"])
    }

    @Test func aWindowWithoutAnAppIDTheDaemonTakesIsLeftOutAndOneListedTwiceIsReportedOnce() {
        let screen = X11Screen(
            clients: [
                Self.client(1, nil), Self.client(2, ""), Self.client(3, String(repeating: "a", count: 256)),
                Self.client(4, "org.example\u{7}bell"), Self.client(5), Self.client(5),
            ],
            active: nil, currentDesktop: 0, hiddenState: Self.hidden
        )
        #expect(screen.windows.map(\.id) == ["0x00000005"])
    }

    @Test func aWindowWhosePidTheServerCannotNameIsReportedWithout() {
        let screen = X11Screen(clients: [Self.client(7, pid: nil)], active: nil, currentDesktop: 0, hiddenState: Self.hidden)
        #expect(screen.windows.first?.pid == nil)
        #expect(screen.windows.first?.wire["pid"] == nil)
    }

    @Test func atMostTheDaemonsLimitOfWindowsIsReported() {
        let clients = (1...1100).map { Self.client(UInt32($0)) }
        let screen = X11Screen(clients: clients, active: nil, currentDesktop: 0, hiddenState: Self.hidden)
        #expect(screen.windows.count == 1024)
        #expect(screen.windows.last?.id == "0x00000400")
    }

    @Test func windowIDsAreEightHexadecimalDigits() {
        #expect(X11Screen.windowID(0) == "0x00000000")
        #expect(X11Screen.windowID(0x60_000C) == "0x0060000c")
        #expect(X11Screen.windowID(0xFFFF_FFFF) == "0xffffffff")
    }

    // MARK: Property values

    @Test func theAppIDIsWMClasssClassPart() {
        func appID(_ text: String, complete: Bool = true) -> String? {
            X11Screen.appID(wmClass: Array(text.utf8), complete: complete)
        }
        #expect(appID("app\0org.example.mail\0") == "org.example.mail")
        #expect(appID("xterm\0XTerm") == "XTerm", "without its closing NUL")
        #expect(appID("\0org.example.mail\0") == "org.example.mail", "an empty instance")
        #expect(appID("xterm\0\0") == nil)
        #expect(appID("xterm\0") == nil)
        #expect(appID("xterm") == nil)
        #expect(appID("app\0org.example.ma", complete: false) == nil, "a class cut short would name another app")
        #expect(X11Screen.appID(wmClass: [0x61, 0, 0x63, 0x61, 0x66, 0xE9], complete: true) == "café", "Latin-1")
        #expect(X11Screen.appID(wmClass: Array("a\0café".utf8), complete: true, utf8: true) == "café", "UTF8_STRING")
    }

    @Test func theTitleIsNetWMNameElseWMName() {
        let utf8 = Array("Caf\u{E9} \u{2615}".utf8)
        #expect(X11Screen.title(netWMName: utf8, wmName: Array("plain".utf8), wmNameIsUTF8: false) == "Caf\u{E9} \u{2615}")
        #expect(X11Screen.title(netWMName: nil, wmName: [0x43, 0x61, 0x66, 0xE9], wmNameIsUTF8: false) == "Caf\u{E9}")
        #expect(X11Screen.title(netWMName: [], wmName: utf8, wmNameIsUTF8: true) == "Caf\u{E9} \u{2615}")
        #expect(X11Screen.title(netWMName: nil, wmName: nil, wmNameIsUTF8: false) == "")
        // A title ends at a NUL; one cut inside a character ends in U+FFFD, which the report's cleaning keeps.
        #expect(X11Screen.title(netWMName: Array("one\0two".utf8), wmName: nil, wmNameIsUTF8: false) == "one")
        #expect(X11Screen.title(netWMName: Array(utf8.dropLast()), wmName: nil, wmNameIsUTF8: false) == "Caf\u{E9} \u{FFFD}")
    }

    // MARK: The hold on None

    static let start = ContinuousClock.now

    static func at(_ milliseconds: Int) -> ContinuousClock.Instant {
        Self.start + .milliseconds(milliseconds)
    }

    /// openbox's switch: None, then the window that takes the focus, before the hold's time is up: the focus moves
    /// straight from one window to the other, and the deadline that was set goes away.
    @Test func aNoneFollowedByAWindowIsNeverReported() {
        var hold = ActiveWindowHold()
        #expect(hold.propertyRead(1, now: Self.at(0)) == 1)
        #expect(hold.deadline == nil)
        #expect(hold.propertyRead(nil, now: Self.at(10)) == 1)
        #expect(hold.deadline == Self.at(60))
        #expect(hold.propertyRead(2, now: Self.at(11)) == 2)
        #expect(hold.deadline == nil)
        #expect(hold.deadlinePassed(now: Self.at(60)) == .nothing)
        #expect(hold.propertyRead(2, now: Self.at(70)) == 2)
    }

    /// A None that lasts: reported once the hold's time is up, through the deadline (read again) or through any
    /// read after it; reads of None meanwhile do not lengthen it.
    @Test func aNoneThatLastsIsReportedAfterTheHold() {
        var hold = ActiveWindowHold()
        _ = hold.propertyRead(1, now: Self.at(0))
        #expect(hold.propertyRead(nil, now: Self.at(10)) == 1)
        #expect(hold.propertyRead(nil, now: Self.at(40)) == 1, "a title changing meanwhile")
        #expect(hold.deadline == Self.at(60))
        #expect(hold.deadlinePassed(now: Self.at(59)) == .nothing)
        #expect(hold.deadlinePassed(now: Self.at(60)) == .changed)
        #expect(hold.deadline == nil)
        #expect(hold.propertyRead(nil, now: Self.at(61)) == nil)
        #expect(hold.deadline == nil, "nothing held while nothing is focused")

        var late = ActiveWindowHold()
        _ = late.propertyRead(1, now: Self.at(0))
        _ = late.propertyRead(nil, now: Self.at(10))
        #expect(late.propertyRead(nil, now: Self.at(75)) == nil, "a read after the time is up, before the deadline's call")
        #expect(late.deadlinePassed(now: Self.at(76)) == .nothing)
    }

    @Test func noneFromTheStartIsReportedAtOnceAndTheHoldTimeIsTheCallers() {
        var hold = ActiveWindowHold(holdTime: .milliseconds(5))
        #expect(hold.propertyRead(nil, now: Self.at(0)) == nil)
        #expect(hold.deadline == nil)
        _ = hold.propertyRead(3, now: Self.at(1))
        _ = hold.propertyRead(nil, now: Self.at(2))
        #expect(hold.deadline == Self.at(7))
        #expect(ActiveWindowHold.holdTime == .milliseconds(50))
    }
}
