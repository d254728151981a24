import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// A listening socket passed by the service manager (socket activation).
public struct ListenedSocket: Sendable, Hashable {
    /// The descriptor, from `SD_LISTEN_FDS_START` up.
    public var descriptor: CInt
    /// `FileDescriptorName=` of the socket unit, `unknown` when none was set.
    public var name: String
    /// The socket file's path, for a Unix socket bound to one.
    public var path: String?

    /// Closes the descriptor: for a socket passed and not served, which would otherwise stay open for good.
    public func close() {
        _ = Glibc.close(self.descriptor)
    }
}

/// Why the passed sockets cannot be used.
public struct ListenFDsError: Error, Hashable, CustomStringConvertible {
    public var reason: String
    public var description: String { self.reason }
}

public enum ListenFDs {
    /// The sockets passed with `LISTEN_FDS`, which are taken out of the environment so children do not inherit them.
    /// - Throws: ``ListenFDsError`` when the variables are inconsistent or a descriptor is not a listening Unix
    ///   stream socket.
    public static func take() throws(ListenFDsError) -> [ListenedSocket] {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        let count = sd_listen_fds_with_names(1, &names)
        guard count >= 0 else {
            throw ListenFDsError(reason: "cannot read LISTEN_FDS: \(String(cString: strerror(-count)))")
        }
        defer {
            if let names {
                for index in 0..<Int(count) { free(names[index]) }
                free(names)
            }
        }
        var sockets: [ListenedSocket] = []
        for index in 0..<count {
            let fd = SD_LISTEN_FDS_START + index
            guard sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0 else {
                throw ListenFDsError(reason: "passed fd \(fd) is not a listening Unix stream socket; check ListenStream= in coalesced.socket")
            }
            let name = names?[Int(index)].map { String(cString: $0) } ?? "unknown"
            sockets.append(ListenedSocket(descriptor: fd, name: name, path: self.boundPath(fd)))
        }
        return sockets
    }

    private static func boundPath(_ fd: CInt) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let result = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard result == 0, length > MemoryLayout<sa_family_t>.size else { return nil }
        return withUnsafeBytes(of: address.sun_path) { raw in
            let bytes = raw.prefix(Int(length) - MemoryLayout<sa_family_t>.size).prefix { $0 != 0 }
            return bytes.first == nil ? nil : String(decoding: bytes, as: UTF8.self)
        }
    }
}
