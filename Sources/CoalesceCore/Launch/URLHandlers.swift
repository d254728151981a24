/// Which app opens a URL (App.Open): the URL schemes and MIME types apps declare (Register's `urlSchemes` and
/// `mimeTypes`, and a desktop file's `MimeType=`), and the one choice among them.
public enum URLHandlers {
    /// The longest URL Open takes, in bytes.
    public static let maximumURLLength = 8192
    /// At most this many URL schemes, and as many MIME types, per app.
    public static let maximumDeclared = 32

    /// The scheme of `url` (RFC 3986: a letter, then letters, digits, `+`, `-` or `.`, before the first `:`),
    /// lowercased; `nil` when it has none.
    public static func scheme(of url: String) -> String? {
        guard let colon = url.utf8.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let scheme = url.utf8[..<colon]
        guard let first = scheme.first, Self.isLetter(first), scheme.allSatisfy(Self.isSchemeByte) else { return nil }
        return String(decoding: scheme, as: UTF8.self).lowercased()
    }

    /// Why `scheme` is no URL scheme an app may declare; `nil` when it is one.
    public static func problem(inScheme scheme: String) -> String? {
        guard !scheme.isEmpty, scheme.utf8.count <= 64 else { return "a URL scheme is 1 to 64 bytes" }
        guard let first = scheme.utf8.first, Self.isLetter(first), scheme.utf8.allSatisfy(Self.isSchemeByte) else {
            return "a URL scheme is a letter followed by letters, digits, '+', '-' or '.' (RFC 3986), without the ':'"
        }
        return nil
    }

    /// Why `type` is no MIME type (`type/subtype`, or `type/*` where an app declares what it opens); `nil` when it
    /// is one.
    public static func problem(inMIMEType type: String, wildcard: Bool) -> String? {
        let parts = type.split(separator: "/", omittingEmptySubsequences: false)
        guard type.utf8.count <= 255, parts.count == 2, parts.allSatisfy({ !$0.isEmpty }),
            parts[0].utf8.allSatisfy(Self.isTokenByte),
            parts[1].utf8.allSatisfy(Self.isTokenByte), wildcard || parts[1] != "*"
        else {
            return wildcard
                ? "a MIME type is type/subtype (or type/*), at most 255 bytes, as in text/calendar"
                : "a MIME type is type/subtype, at most 255 bytes, as in text/calendar"
        }
        return nil
    }

    /// What an app opens: its URL schemes and its MIME types, lowercased.
    public struct Opens: Sendable, Hashable {
        public var schemes: Set<String>
        public var types: Set<String>

        public init(schemes: Set<String> = [], types: Set<String> = []) {
            self.schemes = Set(schemes.map { $0.lowercased() })
            self.types = Set(types.map { $0.lowercased() })
        }

        /// A desktop file's `MimeType=` list: `x-scheme-handler/SCHEME` entries are schemes, the others types.
        public init(desktopMIMETypes list: String) {
            var opens = Opens()
            for entry in list.split(separator: ";") {
                let entry = entry.trimmingSpaces.lowercased()
                if entry.hasPrefix("x-scheme-handler/") {
                    let scheme = String(entry.dropFirst("x-scheme-handler/".count))
                    if URLHandlers.problem(inScheme: scheme) == nil { opens.schemes.insert(scheme) }
                } else if URLHandlers.problem(inMIMEType: entry, wildcard: true) == nil {
                    opens.types.insert(entry)
                }
            }
            self = opens
        }

        public func union(_ other: Opens) -> Opens {
            Opens(schemes: self.schemes.union(other.schemes), types: self.types.union(other.types))
        }

        /// Whether it opens `target`: a URL by its scheme, or, where the opener named a type, a document of that
        /// type (`type/*` takes every subtype).
        public func opens(_ target: Target) -> Bool {
            if let type = target.type {
                let major = type.prefix { $0 != "/" }
                return self.types.contains(type) || self.types.contains("\(major)/*")
            }
            return self.schemes.contains(target.scheme)
        }
    }

    /// What is opened: the URL's scheme and, where the opener named one, its MIME type (both lowercased).
    public struct Target: Sendable, Hashable, CustomStringConvertible {
        public var scheme: String
        public var type: String?

        public init(scheme: String, type: String? = nil) {
            self.scheme = scheme.lowercased()
            self.type = type?.lowercased()
        }

        public var description: String {
            self.type.map { "the type \($0)" } ?? "the URL scheme \(self.scheme)"
        }
    }

    /// The choice among the apps that open a target.
    public enum Choice<App: Hashable & Comparable>: Sendable, Hashable where App: Sendable {
        case app(App)
        /// None of the apps the opener may use opens it (`named`: the one it asked for does not).
        case none(named: App?)
        /// Several do, and the opener named none of them.
        case several([App])
    }

    /// Chooses the app that opens `target` among `apps` (those the opener may use, with what each opens): the one it
    /// named, which must open it; otherwise the only one that does. Several are not guessed between: the opener
    /// names one, as `xdg-open` follows a default the user chose.
    public static func choose<App: Hashable & Comparable & Sendable>(
        _ target: Target,
        among apps: [App: Opens],
        named: App?
    ) -> Choice<App> {
        if let named {
            return apps[named]?.opens(target) == true ? .app(named) : .none(named: named)
        }
        let handlers = apps.compactMap { $0.value.opens(target) ? $0.key : nil }.sorted()
        switch handlers.count {
        case 0: return .none(named: nil)
        case 1: return .app(handlers[0])
        default: return .several(handlers)
        }
    }

    /// The `MimeType=` value of a desktop file's `[Desktop Entry]` group (the Desktop Entry Specification); `nil`
    /// when it has none.
    public static func desktopMIMETypes(_ text: String) -> String? {
        var inEntry = false
        for line in text.split(whereSeparator: \.isNewline) {
            if line.hasPrefix("[") {
                inEntry = line == "[Desktop Entry]"
                continue
            }
            guard inEntry, let equals = line.firstIndex(of: "=") else { continue }
            if line[..<equals].trimmingSpaces == "MimeType" { return String(line[line.index(after: equals)...].trimmingSpaces) }
        }
        return nil
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
    }

    private static func isSchemeByte(_ byte: UInt8) -> Bool {
        Self.isLetter(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }

    /// RFC 2045's token: printable ASCII but space and tspecials.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte < 0x7F && !"()<>@,;:\\\"/[]?=".utf8.contains(byte)
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var trimmed = self.drop { $0 == " " || $0 == "\t" }
        while trimmed.last == " " || trimmed.last == "\t" { trimmed = trimmed.dropLast() }
        return trimmed
    }
}
