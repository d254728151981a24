#if canImport(Glibc)
import Glibc
#endif

/// Gives the calling thread `name` where `top -H`, `ps -L` and perf read it. Foundation's `Thread.name` does not
/// reach the kernel here (a thread shows a name it inherited, cut to 15 bytes), and Glibc's module leaves out
/// `pthread_setname_np`, so it is written to the thread's `comm` (proc(5)). The kernel keeps 15 bytes of it.
public func nameThisThread(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { return }  // no /proc: the name only helps a person looking
    defer { close(fd) }
    var name = name
    _ = name.withUTF8 { write(fd, $0.baseAddress, $0.count) }
}
