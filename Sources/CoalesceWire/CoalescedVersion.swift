/// The release of coalesced: what the daemon reports (GetInfo, Stats, its start-up line) and the tools'
/// `--version` print, from one place.
public enum CoalescedVersion {
    public static let string = "0.1.0"
}
