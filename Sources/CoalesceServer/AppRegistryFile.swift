import CoalesceCore
import Systemd
import Varlink

/// The registry as versions before the store kept it: `apps.json` in the state directory. Read once, to import it
/// into the store, and then renamed to `apps.json.imported`.
struct AppRegistryFile: Sendable {
    let path: String

    init(stateDirectory: String) {
        self.path = stateDirectory + "/apps.json"
    }

    /// Why the registry cannot be read or written.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Whether there is a file to import.
    var exists: Bool { DirectoryEntry.exists(self.path) }

    /// Moves the imported file aside, so that it is imported once.
    func markImported() throws(Failure) {
        do throws(FileError) {
            try DirectoryEntry.rename(self.path, to: self.path + ".imported")
        } catch {
            throw Failure(description: "cannot rename \(self.path): \(error.reason)")
        }
    }

    /// The registrations on disk; none when the file does not exist.
    func load() throws(Failure) -> [AppRegistration] {
        let bytes: [UInt8]
        do throws(SystemdError) {
            // Unbounded, as it always was: the file is the daemon's own, written by versions before the store.
            bytes = try ReadableFile.contents(of: self.path, limit: .max)
        } catch {
            if error.errno == Errno.ENOENT { return [] }
            throw Failure(description: "cannot read \(self.path): \(error.reason)")
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
