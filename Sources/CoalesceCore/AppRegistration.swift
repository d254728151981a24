/// Why a string is not an app name.
public struct AppNameError: Error, Sendable, Hashable, CustomStringConvertible {
    public var name: String
    public var reason: String
    public var description: String { "'\(self.name)' is not an app name: \(self.reason)" }
}

/// An app's name: reverse-DNS, such as `org.example.mail`.
public struct AppName: Sendable, Hashable, Comparable, CustomStringConvertible {
    public static let maximumLength = 255
    public let value: String

    /// - Throws: ``AppNameError`` unless `value` is at least two dot-separated labels of lower-case ASCII letters,
    ///   digits, dashes and underscores, each starting with a letter or digit, at most 255 bytes in all.
    public init(_ value: String) throws(AppNameError) {
        func fail(_ reason: String) -> AppNameError { AppNameError(name: value, reason: reason) }
        guard value.utf8.count <= Self.maximumLength else { throw fail("longer than \(Self.maximumLength) bytes") }
        guard value.utf8.contains(UInt8(ascii: ".")) else { throw fail("expected reverse-DNS form such as org.example.mail") }
        switch DottedName.labels(of: value) {
        case .success: break
        case .failure(.emptyLabel): throw fail("empty label")
        case .failure(.badStart): throw fail("each label starts with a letter or digit")
        case .failure(.badCharacter): throw fail("only lower-case letters, digits, '-' and '_' between the dots")
        }
        self.value = value
    }

    /// A name to look an app up by, unchecked: it finds only a registered app, whose name was checked when it
    /// registered. A post looks its target up this way, since checking the name cost more than the lookup.
    package init(lookingUp value: String) {
        self.value = value
    }

    public var description: String { self.value }
    public static func < (lhs: AppName, rhs: AppName) -> Bool { lhs.value < rhs.value }
}

/// What an app declared when it registered, and who it belongs to. Durable.
public struct AppRegistration: Sendable, Hashable {
    public var name: AppName
    /// The uid that first registered the app: only it (and root) may act for the app.
    public var owner: UInt32
    public var traits: AppTraits
    /// A systemd unit that launches the app, if it has one.
    public var launchUnit: String?
    /// How the app is kept from running code while suspended; `nil`: as the daemon's configuration says.
    public var suspension: SuspensionMode?
    /// The app ids its windows carry besides its name (a desktop file's id, Wayland's app_id, X11's WM_CLASS
    /// class): a window with one of them is the app's, as one with its name is.
    public var windowIDs: Set<String> = []
    /// The URL schemes and MIME types it opens (Register's `urlSchemes` and `mimeTypes`), for App.Open.
    public var opens = URLHandlers.Opens()

    /// At most this many window app ids, each of 1 to 255 bytes.
    public static let maximumWindowIDs = 16

    public init(
        name: AppName,
        owner: UInt32,
        traits: AppTraits = AppTraits(),
        launchUnit: String? = nil,
        suspension: SuspensionMode? = nil
    ) {
        self.name = name
        self.owner = owner
        self.traits = traits
        self.launchUnit = launchUnit
        self.suspension = suspension
    }

    /// Whether `uid` may act for this app: its owner, or root.
    public func mayBeActedFor(by uid: UInt32) -> Bool {
        uid == 0 || uid == self.owner
    }
}
