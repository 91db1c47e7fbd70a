import HalcyonQueue
import Testing

@Suite struct BackoffTests {
    @Test func doublesPerAttemptUpToTheCap() {
        let b = Backoff(base: .seconds(2), maximum: .seconds(60), jitter: 0)
        #expect(b.delay(afterAttempt: 1) == .seconds(2))
        #expect(b.delay(afterAttempt: 2) == .seconds(4))
        #expect(b.delay(afterAttempt: 5) == .seconds(32))
        #expect(b.delay(afterAttempt: 6) == .seconds(60))
        #expect(b.delay(afterAttempt: 1000) == .seconds(60))
    }

    @Test func jitterOnlyShortens() {
        let b = Backoff(base: .seconds(10), maximum: .seconds(600), jitter: 0.25)
        #expect(b.delay(afterAttempt: 1, random: 0) == .seconds(10))
        #expect(b.delay(afterAttempt: 1, random: 1) == .milliseconds(7500))
        for _ in 0..<100 {
            let d = b.delay(afterAttempt: 3)
            #expect(d >= .seconds(30) && d <= .seconds(40))
        }
    }

    @Test func textArraysRoundTrip() {
        let items = ["http://a/b?c=1,2", "with \"quote\"", "back\\slash", ""]
        #expect(PGRows.parseTextArray(PGRows.textArrayLiteral(items)) == items)
        #expect(PGRows.parseTextArray("{}") == [])
        #expect(PGRows.parseTextArray("{a,b}") == ["a", "b"])
    }
}
