/// A journal cursor with the parts that place its entry in the journal's order: a cursor is opaque to
/// sd-journal's callers, and two cannot be compared as text, but its `s=`, `i=`, `b=`, `m=` and `t=` parts are
/// what sd-journal itself orders entries by (the sequence number within one sequence, the monotonic time within
/// one boot, else the wall-clock time).
public struct JournalCursor: Sendable, Hashable, CustomStringConvertible {
    /// The cursor as sd-journal wrote it: what is stored and sought.
    public let text: String
    public let sequenceID: Substring
    public let sequenceNumber: UInt64
    public let bootID: Substring
    public let monotonic: UInt64
    public let realtime: UInt64

    /// Reads a cursor as sd-journal writes them (`s=…;i=…;b=…;m=…;t=…;x=…`, numbers in hexadecimal); `nil` for
    /// text that is not one.
    public init?(_ text: String) {
        var sequenceID: Substring?
        var sequenceNumber: UInt64?
        var bootID: Substring?
        var monotonic: UInt64?
        var realtime: UInt64?
        for part in text.split(separator: ";") {
            guard part.count >= 2, part.dropFirst().first == "=" else { return nil }
            let value = part.dropFirst(2)
            switch part.first {
            case "s": sequenceID = value
            case "i": sequenceNumber = UInt64(value, radix: 16)
            case "b": bootID = value
            case "m": monotonic = UInt64(value, radix: 16)
            case "t": realtime = UInt64(value, radix: 16)
            default: continue
            }
        }
        guard let sequenceID, let sequenceNumber, let bootID, let monotonic, let realtime else { return nil }
        self.text = text
        self.sequenceID = sequenceID
        self.sequenceNumber = sequenceNumber
        self.bootID = bootID
        self.monotonic = monotonic
        self.realtime = realtime
    }

    public var description: String { self.text }

    /// Whether this entry comes after `other` in the journal's order: by sequence number within one sequence, by
    /// monotonic time within one boot, else by wall-clock time (which a clock set back can mislead, as it does
    /// sd-journal).
    public func isAfter(_ other: JournalCursor) -> Bool {
        if self.sequenceID == other.sequenceID { return self.sequenceNumber > other.sequenceNumber }
        if self.bootID == other.bootID { return self.monotonic > other.monotonic }
        return self.realtime > other.realtime
    }

    /// The later of two positions; `nil` counts as before everything.
    public static func later(_ one: JournalCursor?, _ other: JournalCursor?) -> JournalCursor? {
        guard let one else { return other }
        guard let other else { return one }
        return other.isAfter(one) ? other : one
    }
}
