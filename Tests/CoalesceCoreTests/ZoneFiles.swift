import CoalesceCore
import Glibc

/// The machine's zone files, read for the tests (the daemon's shell reads them the same way).
enum ZoneFiles {
    static func bytes(_ path: String) -> [UInt8] {
        let descriptor = open(path, O_RDONLY)
        precondition(descriptor >= 0, "cannot open \(path)")
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            precondition(count >= 0, "cannot read \(path)")
            if count == 0 { return bytes }
            bytes += buffer[0..<count]
        }
    }

    /// The names of every TZif file under /usr/share/zoneinfo, leaving out the `right/` and `posix/` copies.
    static func allNames(under directory: String = "") -> [String] {
        guard let handle = opendir("/usr/share/zoneinfo/" + directory) else { return [] }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard !name.hasPrefix("."), name != "right", name != "posix" else { continue }
            let path = directory.isEmpty ? name : directory + "/" + name
            if entry.pointee.d_type == UInt8(DT_DIR) {
                names += self.allNames(under: path)
            } else if entry.pointee.d_type == UInt8(DT_REG), self.bytes("/usr/share/zoneinfo/" + path).starts(with: Array("TZif".utf8)) {
                names.append(path)
            }
        }
        return names.sorted()
    }

    /// /usr/share/zoneinfo/NAME as ``ZoneRules``.
    static func rules(_ name: String) throws -> ZoneRules {
        try ZoneRules(name: name, tzif: self.bytes("/usr/share/zoneinfo/" + name))
    }
}

/// `2026-03-29 01:00:00`, in UTC.
func utc(_ text: String) -> WallTime {
    let parts = text.split(whereSeparator: { $0 == "-" || $0 == " " || $0 == ":" }).map { Int($0)! }
    let local = LocalDateTime(year: parts[0], month: parts[1], day: parts[2], hour: parts[3], minute: parts[4], second: parts[5])
    return WallTime(seconds: local.localSeconds)
}

/// `2026-03-29 03:00:00` on the wall.
func wall(_ text: String) -> LocalDateTime {
    let parts = text.split(whereSeparator: { $0 == "-" || $0 == " " || $0 == ":" }).map { Int($0)! }
    return LocalDateTime(year: parts[0], month: parts[1], day: parts[2], hour: parts[3], minute: parts[4], second: parts[5])
}
