import CoalesceCore
import CoalesceTestSupport
import Foundation
import Testing

@testable import CoalesceServer

/// The tz database of the machine (scripts/setup installs tzdata), and zone links in temporary directories standing
/// for /etc/localtime.
@Suite struct ZoneDatabaseTests {
    static let january2026 = WallTime(seconds: 1_768_478_400)  // 2026-01-15T12:00:00Z
    static let july2026 = WallTime(seconds: 1_784_116_800)  // 2026-07-15T12:00:00Z

    @Test func aNamedZoneLoadsWithItsOffsets() throws {
        let berlin = try ZoneDatabase().rules(named: "Europe/Berlin")
        #expect(berlin.name == "Europe/Berlin")
        #expect(berlin.offset(at: Self.january2026.seconds) == 3600)
        #expect(berlin.offset(at: Self.july2026.seconds) == 7200)
        let buenosAires = try ZoneDatabase().rules(named: "America/Argentina/Buenos_Aires")
        #expect(buenosAires.offset(at: Self.july2026.seconds) == -3 * 3600)
        let gmtPlus5 = try ZoneDatabase().rules(named: "Etc/GMT+5")
        #expect(gmtPlus5.offset(at: Self.july2026.seconds) == -5 * 3600)
    }

    @Test(arguments: [
        ("../etc/passwd", "a zone name has no '.' or '..' component"),
        ("Europe/../../../etc/passwd", "a zone name has no '.' or '..' component"),
        (
            "/etc/passwd",
            "a zone name is relative to the tz database, not a path (Europe/Berlin, not /usr/share/zoneinfo/Europe/Berlin)"
        ),
        ("Europe//Berlin", "a zone name has no empty component (no '//', no '/' at the end)"),
        ("Europe/", "a zone name has no empty component (no '//', no '/' at the end)"),
        ("Europe/Berlin\n", "(U+000A) cannot be in a zone name (letters, digits, '/', '_', '-', '+')"),
        ("", "the name is empty; zones are named as in the tz database, such as Europe/Berlin"),
        ("Europe/Berlin ", "' ' (U+0020) cannot be in a zone name (letters, digits, '/', '_', '-', '+')"),
        ("Europe/Berlin.tzif", "'.' (U+002E) cannot be in a zone name (letters, digits, '/', '_', '-', '+')"),
        ("Europe/Zürich", "'ü' (U+00FC) cannot be in a zone name (letters, digits, '/', '_', '-', '+')"),
    ])
    func aBadNameIsRefusedWithTheReason(name: String, reason: String) {
        #expect(throws: ZoneRulesError(zone: name, reason: reason)) { _ = try ZoneDatabase().rules(named: name) }
    }

    @Test func aMissingZoneNamesTheDirectory() throws {
        #expect(throws: ZoneRulesError(zone: "Mars/Olympus_Mons", reason: "no such zone in /usr/share/zoneinfo")) {
            _ = try ZoneDatabase().rules(named: "Mars/Olympus_Mons")
        }
        let directory = try TemporaryDirectory()
        #expect(throws: ZoneRulesError(zone: "Europe/Berlin", reason: "no such zone in \(directory.path)")) {
            _ = try ZoneDatabase(directory: directory.path).rules(named: "Europe/Berlin")
        }
        #expect(
            throws: ZoneRulesError(
                zone: "Europe",
                reason: "/usr/share/zoneinfo/Europe is a directory of zones, not a zone (such as Europe/Berlin)")
        ) {
            _ = try ZoneDatabase().rules(named: "Europe")
        }
    }

    @Test func utcIsHadWithoutItsFile() throws {
        let empty = try TemporaryDirectory()
        let utc = try ZoneDatabase(directory: empty.path).rules(named: "UTC")
        #expect(utc.name == "UTC")
        #expect(utc.offset(at: Self.july2026.seconds) == 0)
        #expect(try ZoneDatabase(directory: empty.path).rules(named: "Etc/UTC").offset(at: Self.july2026.seconds) == 0)
    }

    @Test func aFileThatIsNotTZifIsRefused() throws {
        let directory = try TemporaryDirectory()
        try directory.write("Europe/Nowhere", "not a zone\n")
        #expect(throws: ZoneRulesError.self) {
            _ = try ZoneDatabase(directory: directory.path).rules(named: "Europe/Nowhere")
        }
    }

    @Test func theLocalZoneIsTheNameOfItsLink() throws {
        let directory = try TemporaryDirectory()
        #expect(symlink("/usr/share/zoneinfo/Asia/Tokyo", directory.file("localtime")) == 0)
        let local = ZoneDatabase(localtimePath: directory.file("localtime")).local()
        #expect(local.name == "Asia/Tokyo")
        #expect(local.offset(at: Self.july2026.seconds) == 9 * 3600)
    }

    @Test func aRelativeLinkCountsFromItsDirectory() throws {
        // As systemd writes it: /etc/localtime -> ../usr/share/zoneinfo/Asia/Tokyo, here in a copy of the database.
        let root = try TemporaryDirectory()
        try root.directory("etc")
        try root.directory("zoneinfo/Asia")
        let tokyo = try Data(contentsOf: URL(fileURLWithPath: "/usr/share/zoneinfo/Asia/Tokyo"))
        try tokyo.write(to: URL(fileURLWithPath: root.file("zoneinfo/Asia/Tokyo")))
        #expect(symlink("../zoneinfo/./Asia/Tokyo", root.file("etc/localtime")) == 0)
        let database = ZoneDatabase(directory: root.file("zoneinfo"), localtimePath: root.file("etc/localtime"))
        #expect(database.local().name == "Asia/Tokyo")
        #expect(database.local().offset(at: Self.january2026.seconds) == 9 * 3600)
    }

    @Test func aLocalFileOfItsOwnIsNamedLocaltime() throws {
        let directory = try TemporaryDirectory()
        let tokyo = try Data(contentsOf: URL(fileURLWithPath: "/usr/share/zoneinfo/Asia/Tokyo"))
        try tokyo.write(to: URL(fileURLWithPath: directory.file("localtime")))
        let local = ZoneDatabase(localtimePath: directory.file("localtime")).local()
        #expect(local.name == "localtime")
        #expect(local.offset(at: Self.july2026.seconds) == 9 * 3600)
        // A link outside the database leads to such a file.
        #expect(symlink(directory.file("localtime"), directory.file("link")) == 0)
        #expect(ZoneDatabase(localtimePath: directory.file("link")).local().name == "localtime")
    }

    @Test func noLocalZoneIsUTC() throws {
        let directory = try TemporaryDirectory()
        let missing = ZoneDatabase(localtimePath: directory.file("localtime"))
        #expect(missing.local() == .utc)
        #expect(try missing.localZone() == .utc)
        #expect(symlink("/usr/share/zoneinfo/Nowhere/Nothing", directory.file("dangling")) == 0)
        #expect(ZoneDatabase(localtimePath: directory.file("dangling")).local() == .utc)
        // Damaged: UTC, and localZone() says why.
        try directory.write("damaged", "not a zone\n")
        let damaged = ZoneDatabase(localtimePath: directory.file("damaged"))
        #expect(damaged.local() == .utc)
        #expect(throws: ZoneRulesError.self) { _ = try damaged.localZone() }
    }
}
