import CoalesceCore
import PropertyBased
import Testing

/// Exactly once, whatever comes between: random runs of writes, passes (some broken off by a read error), answers,
/// failed writes, time, redefinitions and kills of the daemon; once everything has settled, each app has received
/// each entry its watch matched once, alone or counted in a folded batch.
///
/// Each watch posts to one app, and a failed write fails every post in flight: the positions on disk do not cover
/// an app that has no position of a watch that has none of its own while another app has one, nor an app's post
/// kept after an earlier one of the same watch failed.
@Suite struct WatchPositionsPropertyTests {
    typealias Rig = WatchPositionsTests.Rig

    enum Step: Int, CaseIterable {
        case write, writeThree, pass, passBrokenOff, passBrokenOffAtOnce, answerOne, answerAll, failAll, tick
        case redefine, restart
    }

    static let steps = Gen.int(in: 0...(Step.allCases.count - 1)).array(of: 0...60)

    struct World {
        var rig: Rig
        var clock = 0
        var otherKind = false

        init(interval: Duration) {
            self.rig = Rig([WatchPositionsTests.errors, WatchPositionsTests.audit], interval: interval)
            self.rig.recipients[WatchPositionsTests.audit] = [WatchPositionsTests.pager]
            self.rig.matches[WatchPositionsTests.audit] = { $0 % 2 == 0 }
            self.rig.starts = [WatchPositionsTests.errors: .head, WatchPositionsTests.audit: .head]
            self.rig.follow()
        }

        mutating func run(_ step: Step) {
            let last = self.rig.journal.count
            switch step {
            case .write: self.rig.write(last + 1...last + 1)
            case .writeThree: self.rig.write(last + 1...last + 3)
            case .pass: self.rig.pass()
            case .passBrokenOff: self.rig.pass(failingAfter: 1)
            case .passBrokenOffAtOnce: self.rig.pass(failingAfter: 0)
            case .answerOne:
                guard let first = self.rig.inFlight.first else { return }
                self.rig.answer { $0.key == first.key && $0.cursor == first.cursor }
            case .answerAll: self.rig.answer()
            case .failAll: self.rig.answer(failing: true)
            case .tick:
                self.clock += 500
                self.rig.tick(to: self.clock)
            case .redefine:
                self.otherKind.toggle()
                self.rig.definitions[0] = WatchPositionsTests.watch(
                    WatchPositionsTests.errors, kind: self.otherKind ? "log.other" : "log.errors"
                )
                self.rig.follow()
            case .restart: self.rig.restart()
            }
        }

        /// Answers, reads and lets time pass until nothing is in flight, folding or left to read.
        mutating func settle() -> Bool {
            for _ in 0..<50 {
                if self.rig.inFlight.isEmpty, self.rig.machine.nextDue == nil, self.rig.next == self.rig.journal.count {
                    return true
                }
                self.rig.answer()
                self.rig.pass()
                self.clock += 1000
                self.rig.tick(to: self.clock)
            }
            return false
        }

        /// By watch and app, the entries its posts stand for.
        var counts: [String: Int] {
            self.rig.received.mapValues { posts in posts.map { Int($0.split(separator: "×")[0])! }.reduce(0, +) }
        }

        /// By watch and app, the last entry of each post, sorted.
        var lasts: [String: [Int]] {
            self.rig.received.mapValues { posts in posts.map { Int($0.split(separator: "×")[1])! }.sorted() }
        }
    }

    @Test func eachEntryIsPostedOncePerApp() async {
        await propertyCheck(count: 1000, input: Self.steps) { codes in
            var world = World(interval: .zero)
            for code in codes { world.run(Step(rawValue: code)!) }
            let steps = codes.map { "\(Step(rawValue: $0)!)" }
            let settled = world.settle()
            #expect(settled, "steps: \(steps)")
            let journal = world.rig.journal
            #expect(world.lasts["errors→monitor", default: []] == journal, "steps: \(steps)")
            #expect(world.lasts["audit→pager", default: []] == journal.filter { $0 % 2 == 0 }, "steps: \(steps)")
        }
    }

    @Test func foldedBatchesCountEachEntryOnce() async {
        await propertyCheck(count: 1000, input: Self.steps) { codes in
            var world = World(interval: .seconds(1))
            for code in codes { world.run(Step(rawValue: code)!) }
            let steps = codes.map { "\(Step(rawValue: $0)!)" }
            let settled = world.settle()
            #expect(settled, "steps: \(steps)")
            let journal = world.rig.journal
            #expect(world.counts["errors→monitor", default: 0] == journal.count, "steps: \(steps)")
            #expect(world.counts["audit→pager", default: 0] == journal.count(where: { $0 % 2 == 0 }), "steps: \(steps)")
        }
    }
}
