import CoalesceCore
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// The registered apps, kept in `apps.json` in the state directory. Every change is written to a new file that is
/// flushed to disk and renamed over the old one, so a crash leaves either the old registry or the new, never half.
struct AppRegistryFile: Sendable {
    let path: String

    init(stateDirectory: String) {
        self.path = stateDirectory + "/apps.json"
    }

    /// Why the registry cannot be read or written.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The registrations on disk; none when the file does not exist yet.
    func load() throws(Failure) -> [AppRegistration] {
        let fd = open(self.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return [] }
            throw Failure(description: "cannot read \(self.path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else {
                throw Failure(description: "cannot read \(self.path): \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            bytes += chunk[..<count]
        }
        do {
            let document = try JSONParser.parse(bytes)
            guard let apps = document["apps"]?.arrayValue else { throw Failure(description: "no 'apps' array") }
            return try apps.map { entry throws(Failure) in try Self.registration(entry) }
        } catch let failure as Failure {
            throw Failure(description: "\(self.path) is damaged (\(failure)); move it aside to start with no apps")
        } catch {
            throw Failure(description: "\(self.path) is damaged (\(error)); move it aside to start with no apps")
        }
    }

    /// Replaces the registry on disk with `registrations`, durably.
    func save(_ registrations: [AppRegistration]) throws(Failure) {
        let document: JSONValue = [
            "version": 1,
            "apps": .array(registrations.sorted { $0.name < $1.name }.map(Self.entry)),
        ]
        var bytes: [UInt8] = []
        document.write(to: &bytes)
        bytes.append(UInt8(ascii: "\n"))
        do {
            try DurableFile.replace(self.path, with: bytes)
        } catch {
            throw Failure(description: error.description)
        }
    }

    private static func entry(_ registration: AppRegistration) -> JSONValue {
        var object: [String: JSONValue] = [
            "name": .string(registration.name.value),
            "owner": .int(Int64(registration.owner)),
            "backgroundModes": .array(registration.traits.backgroundModes.sorted().map { .string($0) }),
            "exitsOnSuspend": .bool(registration.traits.exitsOnSuspend),
        ]
        if let unit = registration.launchUnit { object["launchUnit"] = .string(unit) }
        return .object(object)
    }

    private static func registration(_ entry: JSONValue) throws(Failure) -> AppRegistration {
        guard let nameText = entry["name"]?.stringValue, let owner = entry["owner"]?.intValue,
            let owner = UInt32(exactly: owner)
        else { throw Failure(description: "an entry without a name or owner") }
        let name: AppName
        do { name = try AppName(nameText) } catch { throw Failure(description: "\(error)") }
        let modes = Set((entry["backgroundModes"]?.arrayValue ?? []).compactMap(\.stringValue))
        return AppRegistration(
            name: name,
            owner: owner,
            traits: AppTraits(backgroundModes: modes, exitsOnSuspend: entry["exitsOnSuspend"]?.boolValue ?? false),
            launchUnit: entry["launchUnit"]?.stringValue
        )
    }
}
