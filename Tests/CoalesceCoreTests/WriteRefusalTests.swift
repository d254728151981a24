import CoalesceCore
import Testing

/// What the journal hears of the store's refusals, whoever wrote: once when it starts refusing, once when it keeps a
/// write again, whatever the number of writes between.
@Suite struct WriteRefusalTests {
    @Test func aRunOfRefusalsIsToldOnceAndItsEndOnceForEachWriter() {
        var refusal = WriteRefusal()
        let answers: [(what: String, refusal: String?, told: WriteRefusal.Notice?)] = [
            ("events", nil, nil),
            ("events", "disk full", .failing(what: "events", reason: "disk full")),
            ("events", "disk full", nil),
            ("notifications", "disk full", .failing(what: "notifications", reason: "disk full")),
            ("notifications", "disk full", nil),
            // A small write of one kept between refusals of the other's is no news about the other.
            ("notifications", nil, .writingAgain(what: "notifications")),
            ("events", "disk full", nil),
            ("events", nil, .writingAgain(what: "events")),
            ("events", nil, nil),
            ("notifications", "database disk image is malformed", .failing(what: "notifications", reason: "database disk image is malformed")),
        ]
        for (index, answer) in answers.enumerated() {
            let told = refusal.answered(answer.what, refusal: answer.refusal)
            #expect(told == answer.told, "answer \(index): \(answer.what) \(answer.refusal ?? "kept")")
        }
        #expect(refusal.failing("notifications") && !refusal.failing("events"))
    }

    @Test func aStartOnAFullDiskHasSaidSoAlready() {
        var refusal = WriteRefusal(failing: true)
        let first = refusal.answered("events", refusal: "disk full")
        #expect(first == nil)
        let other = refusal.answered("notifications", refusal: "disk full")
        #expect(other == nil)
        let kept = refusal.answered("events", refusal: nil)
        #expect(kept == .writingAgain(what: "events"))
    }

    @Test func whatCouldNotBeKeptIsTriedAgainASecondLater() {
        #expect(WriteRefusal.retryDelay == .seconds(1))
    }
}
