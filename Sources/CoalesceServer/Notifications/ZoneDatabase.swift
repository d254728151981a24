import CoalesceCore
import Systemd

/// The tz database on disk: named zones from /usr/share/zoneinfo, and the machine's zone from the /etc/localtime
/// link, as systemd's daemons read it (not `$TZ`, which is the daemon's own environment, not the machine's).
struct ZoneDatabase: Sendable {
    /// The directory of TZif files (`Europe/Berlin` is `directory/Europe/Berlin`).
    let directory: String
    /// The machine's zone: a link to a file in ``directory``, or a TZif file of its own.
    let localtimePath: String

    /// The largest TZif file read: the biggest in the database is under 5 KiB (with leap seconds, under 10 KiB).
    static let maximumFileSize = 256 * 1024

    init(directory: String = "/usr/share/zoneinfo", localtimePath: String = "/etc/localtime") {
        self.directory = Self.lexicallyNormalized(directory)
        self.localtimePath = localtimePath
    }

    /// The rules of the zone `name` (`Europe/Berlin`). `UTC` and `Etc/UTC` are had even without their files.
    /// - Throws: ``ZoneRulesError`` saying why: the name is not a zone name, no such zone is in ``directory``, its
    ///   file cannot be read or is not a TZif file.
    func rules(named name: String) throws(ZoneRulesError) -> ZoneRules {
        try Self.validate(name)
        let path = self.directory + "/" + name
        switch Self.readFile(path) {
        case .success(let bytes):
            return try ZoneRules(name: name, tzif: bytes)
        case .failure(let code) where code == Errno.ENOENT || code == Errno.ENOTDIR:
            if name == "UTC" || name == "Etc/UTC" {
                return ZoneRules(
                    name: name, fixed: ZoneRules.LocalTimeType(utOffset: 0, isDST: false, abbreviation: "UTC"))
            }
            throw ZoneRulesError(zone: name, reason: "no such zone in \(self.directory)")
        case .failure(let code) where code == Errno.EISDIR:
            throw ZoneRulesError(
                zone: name, reason: "\(path) is a directory of zones, not a zone (such as Europe/Berlin)")
        case .failure(let code) where code == Self.EFTYPE:
            throw ZoneRulesError(zone: name, reason: "\(path) is not a regular file")
        case .failure(let code) where code == Errno.EFBIG:
            throw ZoneRulesError(
                zone: name, reason: "\(path) is larger than \(Self.maximumFileSize) bytes: not a TZif file")
        case .failure(let code):
            throw ZoneRulesError(zone: name, reason: "cannot read \(path): \(SystemdError.reason(code))")
        }
    }

    /// The machine's zone (``localZone()``), or UTC when it cannot be had: no /etc/localtime is UTC, as glibc
    /// and systemd take it.
    func local() -> ZoneRules {
        (try? self.localZone()) ?? .utc  // the reason is ``localZone()``'s, for a caller that logs it
    }

    /// The machine's zone: when ``localtimePath`` is a link into ``directory``, the zone of that name
    /// (`Europe/Berlin`); otherwise the TZif file it is or leads to, named `localtime`. UTC when it does not exist.
    /// - Throws: ``ZoneRulesError`` when it exists but cannot be read, or is not a TZif file.
    func localZone() throws(ZoneRulesError) -> ZoneRules {
        let status: FileStatus
        do throws(SystemdError) {
            status = try FileStatus(at: self.localtimePath, followingLinks: false)
        } catch {
            if error.errno == Errno.ENOENT || error.errno == Errno.ENOTDIR { return .utc }
            throw ZoneRulesError(zone: "localtime", reason: "cannot read \(self.localtimePath): \(error.reason)")
        }
        if status.kind == .symbolicLink, let name = self.zoneName(linkedFrom: self.localtimePath) {
            return try self.rules(named: name)
        }
        switch Self.readFile(self.localtimePath) {
        case .success(let bytes):
            return try ZoneRules(name: "localtime", tzif: bytes)
        case .failure(let code) where code == Errno.ENOENT:
            return .utc  // a dangling link
        case .failure(let code):
            throw ZoneRulesError(
                zone: "localtime", reason: "cannot read \(self.localtimePath): \(SystemdError.reason(code))")
        }
    }

    /// The zone name the link at `path` gives, when it leads into ``directory`` (and the rest is a zone name).
    private func zoneName(linkedFrom path: String) -> String? {
        // A link replaced since it was looked at, or unreadable, is read as a file of its own.
        guard let target = try? SymbolicLink.target(of: path), !target.isEmpty else { return nil }
        var destination = String(decoding: target, as: UTF8.self)
        if !destination.hasPrefix("/") {
            // A relative link (systemd writes ../usr/share/zoneinfo/Europe/Berlin) counts from the link's directory.
            let slash = path.lastIndex(of: "/")
            let base = slash.map { String(path[..<$0]) } ?? "."
            destination = (base.isEmpty ? "" : base) + "/" + destination
        }
        if let name = Self.name(of: Self.lexicallyNormalized(destination), under: self.directory) { return name }
        // The directory, or a directory on the way, may itself be a link (/usr/share/zoneinfo on a merged /usr):
        // compared again with both resolved.
        guard let resolvedTarget = Self.realPath(destination), let resolvedDirectory = Self.realPath(self.directory)
        else {
            return nil
        }
        return Self.name(of: resolvedTarget, under: resolvedDirectory)
    }

    private static func name(of path: String, under directory: String) -> String? {
        let prefix = directory == "/" ? "/" : directory + "/"
        guard path.hasPrefix(prefix) else { return nil }
        let name = String(path.dropFirst(prefix.count))
        return (try? Self.validate(name)) != nil ? name : nil  // otherwise read as a file of its own
    }

    private static func realPath(_ path: String) -> String? {
        try? SymbolicLink.resolved(path)  // a path that leads nowhere names no zone
    }

    /// `path` with `.` and `..` components worked out and repeated slashes removed, without looking at the disk.
    static func lexicallyNormalized(_ path: String) -> String {
        var components: [Substring] = []
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch component {
            case ".": continue
            case "..":
                if let last = components.last, last != ".." {
                    components.removeLast()
                } else if !path.hasPrefix("/") {
                    components.append(component)
                }
            default: components.append(component)
            }
        }
        let joined = components.joined(separator: "/")
        return path.hasPrefix("/") ? "/" + joined : (joined.isEmpty ? "." : joined)
    }

    /// Checks that `name` is a tz database name (`America/Argentina/Buenos_Aires`, `Etc/GMT+5`): components of
    /// letters, digits, `_`, `-` and `+`, separated by `/`, relative to the database, so that it can name no file
    /// outside it.
    /// - Throws: ``ZoneRulesError`` saying what is wrong with it.
    static func validate(_ name: String) throws(ZoneRulesError) {
        func refuse(_ reason: String) -> ZoneRulesError { ZoneRulesError(zone: name, reason: reason) }
        guard !name.isEmpty else {
            throw refuse("the name is empty; zones are named as in the tz database, such as Europe/Berlin")
        }
        guard name.utf8.count <= 255 else { throw refuse("the name is longer than 255 bytes") }
        guard !name.hasPrefix("/") else {
            throw refuse(
                "a zone name is relative to the tz database, not a path (Europe/Berlin, not /usr/share/zoneinfo/Europe/Berlin)"
            )
        }
        let components = name.split(separator: "/", omittingEmptySubsequences: false)
        guard !components.contains(where: { $0 == "." || $0 == ".." }) else {
            throw refuse("a zone name has no '.' or '..' component")
        }
        guard !components.contains(where: \.isEmpty) else {
            throw refuse("a zone name has no empty component (no '//', no '/' at the end)")
        }
        if let bad = name.unicodeScalars.first(where: { !Self.allowed($0) }) {
            let code = String(bad.value, radix: 16, uppercase: true)
            let shown = bad.properties.generalCategory == .control ? "" : "'\(bad)' "
            throw refuse(
                "\(shown)(U+\(String(repeating: "0", count: max(0, 4 - code.count)) + code)) cannot be in a zone name (letters, digits, '/', '_', '-', '+')"
            )
        }
    }

    private static func allowed(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "a"..."z", "A"..."Z", "0"..."9", "/", "_", "-", "+": return true
        default: return false
        }
    }

    /// Not a regular file (a directory, a FIFO, a device): nothing to read a zone from.
    private static let EFTYPE: CInt = -1

    /// The bytes of the regular file at `path`, or the errno (``EFTYPE`` for a file of another kind).
    private static func readFile(_ path: String) -> ReadResult {
        do throws(SystemdError) {
            // Non-blocking: opening a FIFO does not wait for a writer; it is refused below.
            let file = try ReadableFile(path, nonBlocking: true)
            switch try file.kind() {
            case .regular: return .success(try file.readAll(limit: Self.maximumFileSize))
            case .directory: return .failure(Errno.EISDIR)
            case .other: return .failure(Self.EFTYPE)
            }
        } catch {
            return .failure(error.errno)
        }
    }

    private enum ReadResult {
        case success([UInt8])
        case failure(CInt)
    }
}
