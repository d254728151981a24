#if canImport(Glibc)
import Glibc
#endif

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
        case .failure(let code) where code == ENOENT && !required: break
        case .failure(let code):
            throw ConfigurationError(path: path, line: 0, reason: "cannot read: \(String(cString: strerror(code)))")
        }
        let directory = path + ".d"
        for name in self.dropInNames(in: directory) {
            let file = directory + "/" + name
            switch self.read(file) {
            case .success(let text): sources.append(ConfigurationSource(path: file, text: text))
            case .failure(let code):
                throw ConfigurationError(path: file, line: 0, reason: "cannot read: \(String(cString: strerror(code)))")
            }
        }
        return sources
    }

    private static func dropInNames(in directory: String) -> [String] {
        guard let handle = opendir(directory) else { return [] }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasSuffix(".conf"), !name.hasPrefix(".") { names.append(name) }
        }
        // Byte order, as systemd sorts drop-ins, so "10-a.conf" comes before "20-b.conf" in every locale.
        return names.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    }

    private enum ReadResult {
        case success(String)
        case failure(CInt)
    }

    private static func read(_ path: String) -> ReadResult {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(errno) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return .failure(errno)
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[..<count])
            // A configuration file is small; refuse to slurp a device or a runaway file.
            if bytes.count > 1 << 20 { return .failure(EFBIG) }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { return .failure(EILSEQ) }
        return .success(text)
    }
}
