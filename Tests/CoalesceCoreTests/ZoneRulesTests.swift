import CoalesceCore
import Testing

/// The TZif reader and the zone rules, on the machine's own zone files.
@Suite struct ZoneRulesTests {
    @Test func offsetsFromTheListedTransitions() throws {
        let berlin = try ZoneFiles.rules("Europe/Berlin")
        #expect(berlin.offset(at: utc("2026-01-15 12:00:00").seconds) == 3600)
        #expect(berlin.offset(at: utc("2026-07-15 12:00:00").seconds) == 7200)
        #expect(berlin.type(at: utc("2026-07-15 12:00:00").seconds).abbreviation == "CEST")
        // The transition itself: 01:00 UTC is the first instant of CEST.
        #expect(berlin.offset(at: utc("2026-03-29 00:59:59").seconds) == 3600)
        #expect(berlin.offset(at: utc("2026-03-29 01:00:00").seconds) == 7200)
        #expect(berlin.localTime(at: utc("2026-03-29 01:00:00")) == wall("2026-03-29 03:00:00"))
        // Before the first transition: the first local time type (local mean time, +0:53:28).
        #expect(berlin.offset(at: utc("1850-01-01 00:00:00").seconds) == 3208)
    }

    @Test func offsetsPastTheLastTransitionComeFromTheFooter() throws {
        // Debian's files list transitions to 2037; later ones come from the POSIX rule.
        let berlin = try ZoneFiles.rules("Europe/Berlin")
        let transitions2061 = berlin.transitions(from: utc("2061-01-01 00:00:00").seconds, through: utc("2061-12-31 00:00:00").seconds)
        #expect(transitions2061.map(\.at) == [utc("2061-03-27 01:00:00").seconds, utc("2061-10-30 01:00:00").seconds])
        #expect(transitions2061.map(\.after) == [7200, 3600])
        // Santiago's rule has times of 24:00 (M9.1.6/24): the first Saturday of September, at midnight ending it.
        let santiago = try ZoneFiles.rules("America/Santiago")
        let transitions2050 = santiago.transitions(from: utc("2050-01-01 00:00:00").seconds, through: utc("2050-12-31 00:00:00").seconds)
        #expect(transitions2050.map(\.at) == [utc("2050-04-03 03:00:00").seconds, utc("2050-09-04 04:00:00").seconds])
        // Lord Howe: half an hour of DST.
        let lordHowe = try ZoneFiles.rules("Australia/Lord_Howe")
        #expect(lordHowe.offset(at: utc("2060-01-15 00:00:00").seconds) == 11 * 3600)
        #expect(lordHowe.offset(at: utc("2060-07-15 00:00:00").seconds) == 10 * 3600 + 1800)
    }

    @Test func theFooterAgreesWithTheListedTransitions() throws {
        // Where the file lists transitions (2030–2037), the footer gives the same ones: read them both ways.
        for name in ["Europe/Berlin", "Europe/Dublin", "America/Santiago", "Australia/Lord_Howe", "America/New_York"] {
            let zone = try ZoneFiles.rules(name)
            let listed = zone.transitions(from: utc("2030-01-01 00:00:00").seconds, through: utc("2037-06-30 00:00:00").seconds)
            #expect(listed.count >= 14, "\(name)")
            for transition in listed {
                #expect(zone.offset(at: transition.at - 1) == transition.before, "\(name) \(transition)")
                #expect(zone.offset(at: transition.at) == transition.after, "\(name) \(transition)")
            }
            // Each listed year's pair repeats in the footer's years at the same wall times.
            let later = zone.transitions(from: utc("2040-01-01 00:00:00").seconds, through: utc("2040-12-31 00:00:00").seconds)
            #expect(later.count == 2, "\(name)")
        }
    }

    @Test func everyZoneFileIsReadAndItsFooterGivesItsListedTransitions() throws {
        // Every zone on the machine: where the file lists transitions (2030–2037), its footer rule alone gives the
        // same offsets on each side of each one.
        let names = ZoneFiles.allNames()
        #expect(names.count > 300)
        for name in names {
            let bytes = ZoneFiles.bytes("/usr/share/zoneinfo/" + name)
            let zone = try ZoneRules(name: name, tzif: bytes)
            let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            // A footer without DST has no transitions to give; a zone that has one and lists others (Casablanca's
            // Ramadan changes to 2087) lists what no rule says. So do Gaza and Hebron: tzdata predicts DST ending
            // early for Ramadan in 2036 and 2037, which their footer (M10.4.4/50) does not.
            guard lines.count >= 2, let footer = lines.dropLast().last, footer.contains(UInt8(ascii: ",")),
                name != "Asia/Gaza", name != "Asia/Hebron"
            else { continue }
            let rule = try ZoneRules(name: name, posixRule: String(decoding: footer, as: UTF8.self))
            for transition in zone.transitions(from: utc("2030-01-01 00:00:00").seconds, through: utc("2037-12-31 00:00:00").seconds) {
                #expect(rule.offset(at: transition.at - 1) == transition.before, "\(name) before \(transition.at)")
                #expect(rule.offset(at: transition.at) == transition.after, "\(name) at \(transition.at)")
            }
        }
    }

    @Test func aBadPosixRuleIsRefusedWithWhere() {
        let error = #expect(throws: ZoneRulesError.self) { try ZoneRules(name: "X", posixRule: "CET-1CEST") }
        #expect(error?.description == "time zone 'X' cannot be used: its TZ rule 'CET-1CEST' has DST without the dates it starts and ends at character 10")
    }

    @Test func wallTimesInAGapHaveNoInstantAndRepeatedOnesTwo() throws {
        let berlin = try ZoneFiles.rules("Europe/Berlin")
        #expect(berlin.instants(for: wall("2026-03-29 02:30:00")) == [])
        #expect(berlin.instants(for: wall("2026-03-29 03:00:00")) == [utc("2026-03-29 01:00:00").seconds])
        #expect(
            berlin.instants(for: wall("2026-10-25 02:30:00"))
                == [utc("2026-10-25 00:30:00").seconds, utc("2026-10-25 01:30:00").seconds]
        )
        #expect(berlin.instants(for: wall("2026-10-25 03:00:00")) == [utc("2026-10-25 02:00:00").seconds])
        let lordHowe = try ZoneFiles.rules("Australia/Lord_Howe")
        #expect(lordHowe.instants(for: wall("2026-10-04 02:15:00")) == [])
        #expect(lordHowe.instants(for: wall("2026-04-05 01:45:00")).count == 2)
        let santiago = try ZoneFiles.rules("America/Santiago")
        #expect(santiago.instants(for: wall("2026-09-06 00:00:00")) == [])
    }

    @Test func aFixedZoneAndUTC() throws {
        let utcZone = try ZoneFiles.rules("UTC")
        #expect(utcZone.offset(at: utc("2030-01-01 00:00:00").seconds) == 0)
        #expect(ZoneRules.utc.instants(for: wall("2026-03-29 02:30:00")) == [utc("2026-03-29 02:30:00").seconds])
    }

    @Test func badBytesAreRefusedWithTheReason() throws {
        #expect(throws: ZoneRulesError(zone: "X", reason: "shorter than a TZif header")) {
            try ZoneRules(name: "X", tzif: Array("TZif2".utf8))
        }
        var notTZif = ZoneFiles.bytes("/usr/share/zoneinfo/Europe/Berlin")
        notTZif[0] = UInt8(ascii: "X")
        #expect(throws: ZoneRulesError(zone: "X", reason: "not a TZif file (no 'TZif' at its start)")) {
            try ZoneRules(name: "X", tzif: notTZif)
        }
        let truncated = Array(ZoneFiles.bytes("/usr/share/zoneinfo/Europe/Berlin").prefix(600))
        #expect(throws: ZoneRulesError(zone: "X", reason: "the file is truncated")) { try ZoneRules(name: "X", tzif: truncated) }
        let error = #expect(throws: ZoneRulesError.self) { try ZoneFiles.rules("right/Europe/Berlin") }
        #expect(error?.description.contains("leap seconds") == true)
    }

    @Test func aVersionOneFileIsReadFromItsThirtyTwoBitData() throws {
        // The same file with its version byte cleared: only the first (32-bit) block and no footer.
        var bytes = ZoneFiles.bytes("/usr/share/zoneinfo/Europe/Berlin")
        bytes[4] = 0
        let berlin = try ZoneRules(name: "Europe/Berlin", tzif: bytes)
        #expect(berlin.offset(at: utc("2026-07-15 12:00:00").seconds) == 7200)
        #expect(berlin.offset(at: utc("2026-12-15 12:00:00").seconds) == 3600)
    }
}
