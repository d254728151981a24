@testable import CoalesceServer
import Synchronization

// The tests' lock: the standard library's, or, in the ThreadSanitizer build, the daemon's own on a pthread mutex,
// whose hand-overs ThreadSanitizer sees (Sources/CoalesceServer/ThreadSanitizerMutex.swift).
#if COALESCED_TSAN
typealias TestMutex = CoalesceServer.Mutex
#else
typealias TestMutex = Synchronization.Mutex
#endif
