import HalcyonQueue
import Testing

@Suite struct BackoffTests {
    @Test func doublesPerAttemptUpToTheCap() {
        let b = Backoff(base: 2, maximum: 60, jitter: 0)
        #expect(b.delay(afterAttempt: 1) == 2)
        #expect(b.delay(afterAttempt: 2) == 4)
        #expect(b.delay(afterAttempt: 5) == 32)
        #expect(b.delay(afterAttempt: 6) == 60)
        #expect(b.delay(afterAttempt: 1000) == 60)
    }

    @Test func jitterOnlyShortens() {
        let b = Backoff(base: 10, maximum: 600, jitter: 0.25)
        #expect(b.delay(afterAttempt: 1, random: 0) == 10)
        #expect(b.delay(afterAttempt: 1, random: 1) == 7.5)
        for _ in 0..<100 {
            let d = b.delay(afterAttempt: 3)
            #expect(d >= 30 && d <= 40)
        }
    }

    @Test func textArraysRoundTrip() {
        let items = ["http://a/b?c=1,2", "with \"quote\"", "back\\slash", ""]
        #expect(PGRows.parseTextArray(PGRows.textArrayLiteral(items)) == items)
        #expect(PGRows.parseTextArray("{}") == [])
        #expect(PGRows.parseTextArray("{a,b}") == ["a", "b"])
    }
}
