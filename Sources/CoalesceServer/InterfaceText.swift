/// The interface definitions in `Interfaces/`, compiled in by the VarlinkInterfaces plugin: one constant per file,
/// named after the interface (`io.coalesced.System` is ``ioCoalescedSystem``).
enum InterfaceText {}
