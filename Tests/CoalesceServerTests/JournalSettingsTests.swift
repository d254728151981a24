import CoalesceCore
@testable import CoalesceServer
import Testing
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// `[Journal]` and `[JournalWatch NAME]` as the configuration files give them, and a watch's definition as the
/// System interface and the store carry it.
@Suite struct JournalSettingsTests {
    private func parse(_ texts: String...) throws(ConfigurationError) -> Configuration {
        try Configuration.parse(texts.enumerated().map { ConfigurationSource(path: "f\($0.offset).conf", text: $0.element) })
    }

    /// The error `texts` give, as `file:line: reason`.
    private func error(_ texts: String...) -> String? {
        do {
            _ = try Configuration.parse(texts.enumerated().map { ConfigurationSource(path: "f\($0.offset).conf", text: $0.element) })
            return nil
        } catch {
            return error.description
        }
    }

    static let known = "Contains, Fields, Grep, Identifier, Kind, Match, Policy, Priority, To, Unit, UserUnit"

    // MARK: [Journal]

    @Test func theJournalSectionsKeysAndTheirDefaults() throws {
        let defaults = try self.parse("").journal
        #expect(defaults.follows && defaults.interval == .milliseconds(100) && defaults.queueBurst == 100 && defaults.maxWatches == 256)
        #expect(defaults.watches == [])
        #expect(defaults.userWatches == 0, "users have no watches of their own unless the operator says")
        let journal = try self.parse("[Journal]\nFollow=no\nBatchIntervalSec=250ms\nQueueBurst=20\nMaxWatches=3\nUserWatches=4\n").journal
        #expect(!journal.follows && journal.interval == .milliseconds(250) && journal.queueBurst == 20 && journal.maxWatches == 3)
        #expect(journal.userWatches == 4)
        let restored = try self.parse(
            "[Journal]\nFollow=no\nBatchIntervalSec=2s\nQueueBurst=20\nMaxWatches=3\n",
            "[Journal]\nFollow=\nBatchIntervalSec=\nQueueBurst=\nMaxWatches=\n"
        ).journal
        #expect(restored == defaults, "an empty value restores the default")
        #expect(try self.parse("[Journal]\nBatchIntervalSec=10ms\nQueueBurst=10000\nMaxWatches=4096\n").journal.interval == .milliseconds(10))
        #expect(try self.parse("[Journal]\nBatchIntervalSec=1min\n").journal.interval == .seconds(60))
    }

    @Test(arguments: [
        ("BatchIntervalSec=9ms", "bad value '9ms' for BatchIntervalSec=: must be from 10ms to 60s"),
        ("BatchIntervalSec=61s", "bad value '61s' for BatchIntervalSec=: must be from 10ms to 60s"),
        ("QueueBurst=0", "bad value '0' for QueueBurst=: must be between 1 and 10000"),
        ("QueueBurst=10001", "bad value '10001' for QueueBurst=: must be between 1 and 10000"),
        ("MaxWatches=0", "bad value '0' for MaxWatches=: must be between 1 and 4096"),
        ("MaxWatches=4097", "bad value '4097' for MaxWatches=: must be between 1 and 4096"),
        ("Follow=maybe", "bad value 'maybe' for Follow=: expected yes or no"),
        ("Watch=x", "unknown key 'Watch' in [Journal]; known keys: BatchIntervalSec, Follow, MaxWatches, QueueBurst, UserWatches"),
    ])
    func theJournalSectionsBounds(_ line: String, _ reason: String) {
        #expect(self.error("[Journal]\n\(line)\n") == "f0.conf:2: \(reason)")
    }

    // MARK: [JournalWatch NAME]

    @Test func aWatchSectionIsReadIntoAWatch() throws {
        let journal = try self.parse(
            """
            [JournalWatch nginx-errors]
            Unit=nginx.service php-fpm.service
            Unit=extra.service
            UserUnit=app.service
            Identifier=nginx\tnginx-extra
            Priority=err
            Match=_UID=0
            Match=CODE_FILE=a.c
            Match=_UID=33
            Match=MESSAGE_ID=x=y
            Grep=upstream (timed out|refused)
            Kind=log.nginx.errors
            To=org.example.monitor
            Policy=count
            Fields=MESSAGE _PID
            Fields=__CURSOR

            [JournalWatch disk]
            Identifier=kernel
            Contains=I/O error
            Kind=alerts.disk
            To=topic:alerts.disk
            """
        ).journal
        var selection = JournalSelection()
        selection.units = ["nginx.service", "php-fpm.service", "extra.service"]
        selection.userUnits = ["app.service"]
        selection.identifiers = ["nginx", "nginx-extra"]  // a tab separates as a space does
        selection.priority = 3
        selection.fields = ["_UID": ["0", "33"], "CODE_FILE": ["a.c"], "MESSAGE_ID": ["x=y"]]
        let nginx = try JournalWatch(
            name: WatchName("nginx-errors"), selection: selection, pattern: .regex("upstream (timed out|refused)"),
            kind: EventKind("log.nginx.errors"), target: .app(AppName("org.example.monitor")), policy: .count,
            fields: ["MESSAGE", "_PID", "__CURSOR"]
        )
        var kernel = JournalSelection()
        kernel.identifiers = ["kernel"]
        let disk = try JournalWatch(
            name: WatchName("disk"), selection: kernel, pattern: .contains("I/O error"), kind: EventKind("alerts.disk"),
            target: .topic(EventKind("alerts.disk"))
        )
        #expect(journal.watches == [nginx, disk], "in the order of their sections")
        #expect(disk.policy == .latest && disk.fields == JournalWatch.defaultFields, "the defaults")
    }

    private static let minimal = "Kind=log.x\nTo=org.example.monitor\n"

    @Test func anEmptyValueEmptiesAListOrUnsetsAKey() throws {
        let watch = try #require(
            try self.parse(
                "[JournalWatch w]\n\(Self.minimal)Unit=a.service\nUnit=\nUnit=b.service\nMatch=_UID=0\nMatch=\nGrep=x\nGrep=\n"
                    + "Fields=MESSAGE\nFields=\nIdentifier=i\nIdentifier=\nPriority=err\nPriority=\nPolicy=count\nPolicy=\n"
            ).journal.watches.first
        )
        #expect(watch.selection.units == ["b.service"])
        #expect(watch.selection.fields.isEmpty && watch.selection.identifiers.isEmpty && watch.selection.priority == nil)
        #expect(watch.pattern == nil && watch.policy == .latest && watch.fields == JournalWatch.defaultFields)
    }

    @Test func aDropInAddsToASectionOfTheMainFile() throws {
        let watches = try self.parse(
            "[JournalWatch w]\nKind=log.x\nTo=org.example.monitor\nUnit=a.service\n",
            "[JournalWatch w]\nUnit=b.service\nKind=log.y\n[JournalWatch v]\n\(Self.minimal)"
        ).journal.watches
        #expect(watches.map(\.name.value) == ["w", "v"])
        #expect(watches.first?.selection.units == ["a.service", "b.service"], "lists go on")
        #expect(watches.first?.kind.value == "log.y", "a later value replaces an earlier one")
    }

    @Test(arguments: [
        ("[JournalWatch w]\nUnits=a.service\n", "f0.conf:2: unknown key 'Units' in [JournalWatch w]; known keys: \(known)"),
        ("[JournalWatch w]\nLogLevel=debug\n", "f0.conf:2: unknown key 'LogLevel' in [JournalWatch w]; known keys: \(known)"),
        ("# c\n[JournalWatch -w]\n", "f0.conf:2: [JournalWatch -w]: a watch's name is 1 to 64 letters, digits, '-', '_', '.' or '@', starting with a letter or digit"),
        ("[JournalWatch a b]\n", "f0.conf:1: [JournalWatch a b]: a watch's name is 1 to 64 letters, digits, '-', '_', '.' or '@', starting with a letter or digit"),
        ("[Daemon]\n\n[JournalWatch w]\nTo=org.example.monitor\n", "f0.conf:3: [JournalWatch w]: Kind= is missing: the kind its events are posted as"),
        ("[JournalWatch w]\nKind=log.x\nUnit=a.service\n", "f0.conf:1: [JournalWatch w]: To= is missing: an app, or topic:NAME"),
        (
            "[JournalWatch w]\nKind=log.x\nTo=org.example.monitor\nPolicy=sum:PRIORITY\n",
            "f0.conf:1: [JournalWatch w]: sum adds up a number, and journal fields are text: sum:entries adds up the entries the posts stand for"
        ),
        ("[JournalWatch w]\n\(minimal)Grep=x\nContains=y\n", "f0.conf:1: [JournalWatch w]: grep and contains are alternatives: give one"),
        ("[JournalWatch w]\n\(minimal)Priority=loud\n", "f0.conf:1: [JournalWatch w]: priority 'loud' is not one of emerg, alert, crit, err, warning, notice, info, debug or 0-7"),
        ("[JournalWatch w]\n\(minimal)Match=_UID\n", "f0.conf:1: [JournalWatch w]: the match '_UID' is not FIELD=value"),
        ("[JournalWatch w]\n\(minimal)Match=uid=0\n", "f0.conf:1: [JournalWatch w]: the match 'uid=0': a journal field name is upper-case letters, digits and '_', not starting with a digit"),
        ("[JournalWatch w]\nKind=lifecycle.x\nTo=org.example.monitor\n", "f0.conf:1: [JournalWatch w]: kind: lifecycle.* kinds are the daemon's own"),
        ("[JournalWatch w]\nKind=log.x\nTo=monitor\n", "f0.conf:1: [JournalWatch w]: the target 'monitor' is neither an app nor topic:NAME: expected reverse-DNS form such as org.example.mail"),
        ("[JournalWatch w]\n\(minimal)Fields=message\n", "f0.conf:1: [JournalWatch w]: field 'message': a journal field name is upper-case letters, digits and '_', not starting with a digit"),
        ("[Journal]\nMaxWatches=1\n[JournalWatch w]\n\(minimal)[JournalWatch v]\n\(minimal)", "f0.conf:6: more than MaxWatches=1 journal watches; raise [Journal] MaxWatches= or remove some"),
    ])
    func aWatchSectionsErrorsNameTheFileAndLine(_ text: String, _ message: String) {
        #expect(self.error(text) == message)
    }

    @Test func aRegularExpressionTheCompilerRefusesIsReportedInItsWords() {
        #expect(
            self.error("[JournalWatch w]\n\(Self.minimal)Grep=(\n")
                == "f0.conf:1: [JournalWatch w]: the regular expression /(/ cannot be used: missing closing parenthesis (at byte 1)"
        )
        #expect(self.error("[JournalWatch w]\n\(Self.minimal)Grep=upstream (timed out|refused)\n") == nil)
    }

    @Test func aWatchsErrorIsReportedAtItsHeaderInTheFileThatOpenedIt() {
        #expect(
            self.error("[JournalWatch w]\nKind=log.x\n", "\n[JournalWatch w]\nPriority=loud\nTo=org.example.monitor\n")
                == "f0.conf:1: [JournalWatch w]: priority 'loud' is not one of emerg, alert, crit, err, warning, notice, info, debug or 0-7"
        )
        #expect(self.error("[Daemon]\n", "\n[JournalWatch w]\nKind=log.x\n") == "f1.conf:2: [JournalWatch w]: To= is missing: an app, or topic:NAME")
    }

    @Test func anUnknownSectionNamesTheWatchSections() {
        #expect(self.error("[Jurnal]\n")?.contains("[Journal], [JournalWatch NAME]") == true)
    }

    // MARK: Definitions

    @Test func aDefinitionReadsBackAsTheSameWatch() throws {
        let watches = try self.parse(
            """
            [JournalWatch nginx-errors]
            Unit=nginx.service php-fpm.service
            UserUnit=app.service
            Identifier=nginx
            Priority=warning
            Match=_UID=0
            Match=CODE_FILE=a.c
            Match=_UID=33
            Grep=upstream (timed out|refused)
            Kind=log.nginx.errors
            To=org.example.monitor
            Policy=queue:50
            Fields=MESSAGE _PID __CURSOR
            [JournalWatch disk]
            Contains=I/O error
            Kind=alerts.disk
            To=topic:alerts.disk
            Policy=sum:entries
            [JournalWatch all]
            Kind=log.all
            To=org.example.monitor
            Policy=merge
            """
        ).journal.watches
        #expect(watches.count == 3)
        for watch in watches {
            let object = WatchDefinition.object(watch)
            #expect(try WatchDefinition.watch(from: object) == watch, "\(object)")
        }
        let first = WatchDefinition.object(watches[0])
        #expect(first["priority"] == .string("warning") && first["to"] == .string("org.example.monitor") && first["policy"] == .string("queue:50"))
        #expect(first["matches"] == .array(["CODE_FILE=a.c", "_UID=0", "_UID=33"].map { .string($0) }))
        #expect(WatchDefinition.object(watches[1])["to"] == .string("topic:alerts.disk"))
    }

    @Test func aDefinitionsMembersAreCheckedAndNamed() {
        func reason(_ object: JSONObject) -> String? {
            do {
                _ = try WatchDefinition.watch(from: object)
                return nil
            } catch {
                return error.description
            }
        }
        let base: JSONObject = ["name": .string("w"), "kind": .string("log.x"), "to": .string("org.example.monitor")]
        func with(_ member: String, _ value: JSONValue) -> JSONObject {
            var object = base
            object[member] = value
            return object
        }
        #expect(reason(base) == nil)
        #expect(reason(with("units", .string("a.service"))) == "journal watch 'w': units must be a list of strings")
        #expect(reason(with("grep", .int(1))) == "journal watch 'w': grep must be a string")
        #expect(reason(with("policy", .string("loudest")))?.hasPrefix("journal watch 'w': policy: 'loudest' is not a policy") == true)
        #expect(reason(with("name", .string("")))?.hasPrefix("journal watch '': a watch's name is") == true)
    }

    /// A message pattern as the reader tests it: a substring anywhere in the message's first 16 KiB (the first
    /// byte found again and again before the rest matches), or a regular expression.
    @Test func aMessagePatternFindsItsTextAnywhereInTheMessagesFirstBytes() throws {
        let contains = try MessageMatcher(.contains("aab"))
        for message in ["aab", "xaab", "aaab", "xx aab yy", "aaaaaab"] { #expect(contains.test(message) == .matches, "\(message)") }
        for message in ["", "aa", "ab", "aba", "a a b", "AAB"] { #expect(contains.test(message) != .matches, "\(message)") }
        let far = String(repeating: "x", count: MessageMatcher.maximumMessageBytes)
        #expect(contains.test(far + "aab") != .matches, "past the bytes tested")
        #expect(contains.test(String(far.dropLast(3)) + "aab") == .matches, "ending at the last byte tested")
        let regex = try MessageMatcher(.regex("fail(ed|ure) [0-9]+"))
        #expect(regex.test("the job failed 12 times") == .matches && regex.test("failure 7") == .matches && regex.test("fail x") != .matches)
    }
}
