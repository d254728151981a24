import Systemd

/// Finds and reads the configuration files: the main file, then `<main>.d/*.conf` in file-name order.
public enum ConfigurationLoader {
    /// Reads and parses the configuration.
    /// - Parameters:
    ///   - path: the main file.
    ///   - required: whether a missing main file is an error (it is when the user named it with `--config`).
    /// - Throws: ``ConfigurationError`` naming the file and line.
    public static func load(path: String, required: Bool) throws(ConfigurationError) -> Configuration {
        try Configuration.parse(self.sources(path: path, required: required))
    }

    static func sources(path: String, required: Bool) throws(ConfigurationError) -> [ConfigurationSource] {
        var sources: [ConfigurationSource] = []
        switch self.read(path) {
        case .success(let text): sources.append(ConfigurationSource(path: path, text: text))
        case .failure(let code) where code == Errno.ENOENT && !required: break
        case .failure(let code):
            throw ConfigurationError(path: path, line: 0, reason: "cannot read: \(SystemdError.reason(code))")
        }
        let directory = path + ".d"
        for name in self.dropInNames(in: directory) {
            let file = directory + "/" + name
            switch self.read(file) {
            case .success(let text): sources.append(ConfigurationSource(path: file, text: text))
            case .failure(let code):
                throw ConfigurationError(path: file, line: 0, reason: "cannot read: \(SystemdError.reason(code))")
            }
        }
        return sources
    }

    private static func dropInNames(in directory: String) -> [String] {
        // A directory that cannot be listed (none, most often) has no drop-ins.
        let entries = (try? DirectoryListing.names(in: directory)) ?? []
        let names = entries.map { String(decoding: $0, as: UTF8.self) }.filter {
            $0.hasSuffix(".conf") && !$0.hasPrefix(".")
        }
        // Byte order, as systemd sorts drop-ins, so "10-a.conf" comes before "20-b.conf" in every locale.
        return names.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    }

    private enum ReadResult {
        case success(String)
        case failure(CInt)
    }

    private static func read(_ path: String) -> ReadResult {
        let bytes: [UInt8]
        do throws(SystemdError) {
            // A configuration file is small; refuse to slurp a device or a runaway file.
            bytes = try ReadableFile.contents(of: path, limit: 1 << 20)
        } catch {
            return .failure(error.errno)
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { return .failure(Errno.EILSEQ) }
        return .success(text)
    }
}
