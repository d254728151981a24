import ArgumentParser
import CoalesceWire
import Varlink

/// App names for the shell's completion, asked of the daemon (io.coalesced.System.ListApps) on the socket the
/// command line being completed names: `--socket PATH`, `--user`, `--system`, or the default instance's.
enum AppNameCompletion {
    static let kind = CompletionKind.custom { words, _, prefix in AppNameCompletion.names(words: words, prefix: prefix) }

    static func names(words: [String], prefix: String) -> [String] {
        Self.names(listedBy: "io.coalesced.System.ListApps", in: "apps", words: words, prefix: prefix)
    }

    /// The `name` of each entry of the reply's `member` that starts with `prefix`; none when the daemon does not
    /// answer, or refuses (a list only administrators may see).
    static func names(listedBy method: String, in member: String, words: [String], prefix: String) -> [String] {
        guard let client = try? VarlinkClient(path: Self.socket(words: words)) else { return [] }
        client.setReceiveTimeout(.seconds(2))
        guard let reply = try? client.call(method) else { return [] }
        return (reply[member]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue }.filter { $0.hasPrefix(prefix) }
    }

    /// The socket the words name, as GlobalOptions decides it. The shell passes words as typed, quotes included.
    static func socket(words: [String]) -> String {
        var socket: String?
        var system = false
        var user = false
        for (index, word) in words.enumerated() {
            switch word {
            case "--socket" where index + 1 < words.count: socket = Self.unquoted(words[index + 1])
            case "--system": system = true
            case "--user": user = true
            default:
                if word.hasPrefix("--socket=") { socket = Self.unquoted(String(word.dropFirst("--socket=".count))) }
            }
        }
        if let socket { return socket }
        return (try? InstancePaths(instance: DaemonInstance(system: system, user: user)).socket) ?? ""
    }

    private static func unquoted(_ word: String) -> String {
        for quote in ["'", "\""] where word.count >= 2 && word.hasPrefix(quote) && word.hasSuffix(quote) {
            return String(word.dropFirst().dropLast())
        }
        return word
    }
}

/// Journal watch names for the shell's completion, asked of the daemon (io.coalesced.System.ListWatches) on the
/// socket the command line names, as ``AppNameCompletion`` asks for app names.
enum WatchNameCompletion {
    static let kind = CompletionKind.custom { words, _, prefix in
        AppNameCompletion.names(listedBy: "io.coalesced.System.ListWatches", in: "watches", words: words, prefix: prefix)
    }
}
