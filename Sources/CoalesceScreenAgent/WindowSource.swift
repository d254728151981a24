/// What a read of a window system brought.
enum WindowNews: Equatable {
    /// Nothing that changes the windows.
    case nothing
    /// The windows may have changed: read them again.
    case changed
    /// The session is ending (its compositor or X server is going): its windows are gone.
    case ended(String)
}

/// A session's window system, followed: a descriptor to poll, what a read of it brought, and its windows now.
protocol WindowSource: AnyObject {
    /// The Screen interface's name for it: `wayland` or `x11`.
    var source: String { get }
    /// Readable when the window system has news.
    var descriptor: CInt { get }
    /// When the source wants ``deadlinePassed()`` called without news (a change it holds back a moment).
    var deadline: ContinuousClock.Instant? { get }
    /// Reads what the descriptor has. Throws when the connection is lost.
    func read() throws -> WindowNews
    func deadlinePassed() -> WindowNews
    /// Every window the session shows now.
    func windows() throws -> [SessionWindow]
    /// Asks the window system to focus the window `id` (as ``windows()`` names it); its focus comes back as news.
    /// - Returns: `false` when no window has that id.
    func focus(_ id: String) throws -> Bool
}
