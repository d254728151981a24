/// What a watch's regular expression costs to compile, bounded before glibc's `regcomp` ever sees it.
///
/// glibc builds a tree of the expression and copies a repeated subexpression once per repetition: `X{m,n}` becomes
/// `n` copies of `X` (`m + 1` for `X{m,}`), `X+` becomes `X X*`, and a repetition inside another multiplies. The
/// tree, and the automaton made from it, grow with that product, not with the pattern's length: 26 bytes of
/// `((a{1,100}){1,100}){1,100}` are a million copies and gigabytes, 21 bytes of `a++++…` the same; and optional
/// copies (`{0,n}`) nest, so that what they take grows with their square. The cost is the number of tree nodes the
/// expression expands to as glibc reads POSIX extended syntax, with the optional copies' square counted in.
public enum PatternCost {
    /// The most nodes a watch's expression may expand to: the largest pattern allowed compiles in a few megabytes
    /// and milliseconds (docs/operator.md has the figures).
    public static let budget = 4096

    /// The nodes `pattern` expands to, saturating far above ``budget``.
    public static func size(of pattern: String) -> Int {
        var reader = Reader(bytes: Array(pattern.utf8))
        return reader.whole()
    }

    /// Why `pattern` costs too much to compile; `nil` when it does not.
    public static func problem(with pattern: String) -> String? {
        let size = Self.size(of: pattern)
        guard size > Self.budget else { return nil }
        let shown = size >= Reader.ceiling ? "more than \(Reader.ceiling)" : "about \(size)"
        return "the regular expression expands to \(shown) nodes with its repetitions ({m,n}, + and * inside others);"
            + " at most \(Self.budget): use smaller bounds, or fewer repetitions inside repetitions"
    }

    /// A recursive reading of POSIX extended syntax, counting nodes instead of building them.
    private struct Reader {
        static let ceiling = 1 << 40
        let bytes: [UInt8]
        var index = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        static func add(_ a: Int, _ b: Int) -> Int { min(a + b, Self.ceiling) }
        static func multiply(_ a: Int, _ b: Int) -> Int {
            let (product, overflow) = a.multipliedReportingOverflow(by: b)
            return overflow ? Self.ceiling : min(product, Self.ceiling)
        }

        var atEnd: Bool { self.index >= self.bytes.count }
        func peek(_ byte: Character) -> Bool { !self.atEnd && self.bytes[self.index] == byte.asciiValue! }

        /// The whole pattern: alternations, and a `)` without its `(`, which glibc takes as an ordinary character.
        mutating func whole() -> Int {
            var total = self.alternation()
            while !self.atEnd {
                self.index += 1  // a ')' with no '(' open
                total = Self.add(total, Self.add(1, self.alternation()))
            }
            return total
        }

        mutating func alternation() -> Int {
            var total = self.concatenation()
            while self.peek("|") {
                self.index += 1
                total = Self.add(total, Self.add(1, self.concatenation()))
            }
            return total
        }

        mutating func concatenation() -> Int {
            var total = 0
            while !self.atEnd, !self.peek("|"), !self.peek(")") {
                total = Self.add(total, Self.add(1, self.repeated()))
            }
            return total
        }

        /// An atom and the repetitions after it, each applied to what the ones before made.
        mutating func repeated() -> Int {
            var size = self.atom()
            while !self.atEnd {
                if self.peek("*") || self.peek("?") {
                    self.index += 1
                    size = Self.add(size, 1)
                } else if self.peek("+") {
                    self.index += 1
                    size = Self.add(Self.multiply(size, 2), 1)
                } else if self.peek("{"), let (copies, optional) = self.bound() {
                    // Each optional copy nests in the one before it, and what the automaton tracks of them grows
                    // with their square: {0,2000} takes 32 MB where {2000} takes 1.
                    let nesting = Self.multiply(optional, optional) / 256
                    size = Self.add(Self.add(Self.multiply(size, copies), copies), nesting)
                } else {
                    break
                }
            }
            return size
        }

        /// `{m}`, `{m,}` or `{m,n}` at the reader, consumed: the copies glibc makes (at least one), and how many of
        /// them are optional; `nil`, and nothing consumed, when it is no bound (glibc then reads the `{` as an
        /// ordinary character).
        mutating func bound() -> (copies: Int, optional: Int)? {
            var at = self.index + 1
            func number() -> Int? {
                var value: Int?
                while at < self.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self.bytes[at]) {
                    value = min((value ?? 0) * 10 + Int(self.bytes[at] - UInt8(ascii: "0")), Self.ceiling)
                    at += 1
                }
                return value
            }
            let lower = number()
            var upper = lower
            var open = false
            if at < self.bytes.count, self.bytes[at] == UInt8(ascii: ",") {
                at += 1
                upper = number()
                open = upper == nil
            }
            guard at < self.bytes.count, self.bytes[at] == UInt8(ascii: "}"), lower != nil || upper != nil else { return nil }
            self.index = at + 1
            let copies = open ? (lower ?? 0) + 1 : max(lower ?? 0, upper ?? 0)
            let optional = open ? 1 : max((upper ?? 0) - (lower ?? 0), 0)
            return (max(copies, 1), optional)
        }

        mutating func atom() -> Int {
            let byte = self.bytes[self.index]
            self.index += 1
            switch byte {
            case UInt8(ascii: "("):
                let inner = self.alternation()
                if self.peek(")") { self.index += 1 }
                return Self.add(inner, 1)
            case UInt8(ascii: "\\"):
                if !self.atEnd { self.index += 1 }
                return 1
            case UInt8(ascii: "["):
                self.skipBracket()
                return 1
            default:
                return 1
            }
        }

        /// Past a bracket expression: `]` first (after an optional `^`) is a member, and `[:…:]`, `[.….]` and
        /// `[=…=]` hold a `]` of their own.
        mutating func skipBracket() {
            if self.peek("^") { self.index += 1 }
            if self.peek("]") { self.index += 1 }
            while !self.atEnd {
                let byte = self.bytes[self.index]
                if byte == UInt8(ascii: "]") {
                    self.index += 1
                    return
                }
                if byte == UInt8(ascii: "["), self.index + 1 < self.bytes.count,
                    [UInt8(ascii: ":"), UInt8(ascii: "."), UInt8(ascii: "=")].contains(self.bytes[self.index + 1])
                {
                    let close = self.bytes[self.index + 1]
                    var at = self.index + 2
                    while at + 1 < self.bytes.count, !(self.bytes[at] == close && self.bytes[at + 1] == UInt8(ascii: "]")) { at += 1 }
                    self.index = min(at + 2, self.bytes.count)
                    continue
                }
                self.index += 1
            }
        }
    }
}
