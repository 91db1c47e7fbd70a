import HalcyonRuntime
import Testing

/// The one back-off: its growths, cap, jitters and Retry-After (each user's own waits are
/// pinned in its module's tests).
@Suite struct BackoffTests {
    static func same(_ got: [Duration], _ expected: [Double]) -> Bool {
        got.count == expected.count && zip(got, expected).allSatisfy { abs($0.seconds - $1) < 1e-9 }
    }

    @Test func doublesPerAttemptUpToTheCap() {
        let b = Backoff(base: .seconds(2), maximum: .seconds(60))
        #expect(b.delay(afterAttempt: 1) == .seconds(2))
        #expect(b.delay(afterAttempt: 2) == .seconds(4))
        #expect(b.delay(afterAttempt: 5) == .seconds(32))
        #expect(b.delay(afterAttempt: 6) == .seconds(60))
        #expect(b.delay(afterAttempt: 1000) == .seconds(60))
        #expect(b.delay(afterAttempt: 0) == .seconds(2), "attempts from 1")
        #expect(b.ceiling(afterAttempt: 3) == .seconds(8))
        #expect(Backoff(base: .seconds(1)).delay(afterAttempt: 41) == .seconds(1 << 40), "uncapped: up to 2⁴⁰ times the base")
        #expect(Backoff(base: .seconds(1)).delay(afterAttempt: 1000) == .seconds(1 << 40))
    }

    /// Kingfisher's intervals: fixed t, accumulated n·t, exponential t·2ⁿ⁻¹.
    @Test func growsFixedAccumulatedOrExponentially() {
        let t = Duration.milliseconds(500)
        #expect(Self.same((1...4).map { Backoff(base: t, growth: .fixed).delay(afterAttempt: $0) }, [0.5, 0.5, 0.5, 0.5]))
        #expect(Self.same((1...4).map { Backoff(base: t, growth: .accumulated).delay(afterAttempt: $0) }, [0.5, 1, 1.5, 2]))
        #expect(Self.same((1...4).map { Backoff(base: t, growth: .exponential).delay(afterAttempt: $0) }, [0.5, 1, 2, 4]))
        #expect(Self.same((1...4).map { Backoff(base: t, growth: .accumulated, maximum: .seconds(1)).delay(afterAttempt: $0) }, [0.5, 1, 1, 1]))
    }

    /// A fraction of jitter only shortens (d·(1 − j·r)); full jitter is anywhere in 0…d (r·d).
    @Test func jitterFractionOrFull() {
        let b = Backoff(base: .seconds(10), maximum: .seconds(600), jitter: .fraction(0.25))
        #expect(b.delay(afterAttempt: 1, random: 0) == .seconds(10))
        #expect(b.delay(afterAttempt: 1, random: 1) == .milliseconds(7500))
        #expect(b.delay(afterAttempt: 1, random: 9) == .milliseconds(7500), "the draw is held to 0…1")
        for _ in 0..<100 {
            let d = b.delay(afterAttempt: 3)
            #expect(d >= .seconds(30) && d <= .seconds(40))
        }
        let full = Backoff(base: .seconds(1), maximum: .seconds(4), jitter: .full)
        #expect(Self.same([0, 0.25, 1].map { full.delay(afterAttempt: 5, random: $0) }, [0, 1, 4]))
        let draws = (0..<300).map { _ in full.delay(afterAttempt: 2).seconds }
        #expect(draws.allSatisfy { (0...2).contains($0) } && draws.min()! < 0.2 && draws.max()! > 1.8)
        #expect(Backoff(base: .seconds(1), jitter: .fraction(3)).delay(afterAttempt: 1, random: 1) == .zero, "a fraction past 1 is 1")
    }

    @Test func doublingHasNoJitterAndACapNoShorterThanTheBase() {
        let b = Backoff(doubling: .seconds(30), upTo: .seconds(300))
        #expect(b.jitter == .none)
        #expect(Self.same((1...6).map { b.delay(afterAttempt: $0, random: 1) }, [30, 60, 120, 240, 300, 300]))
        #expect(Self.same((1...3).map { Backoff(doubling: .seconds(2), upTo: .seconds(1)).delay(afterAttempt: $0) }, [2, 2, 2]))
    }

    /// A server's Retry-After lengthens a wait, never shortens it, within the cap given (else
    /// `maximum`); one that is not a positive number is none.
    @Test func retryAfterWinsWhenLongerUpToItsCap() {
        let b = Backoff(base: .seconds(1), maximum: .seconds(10))
        #expect(b.delay(afterAttempt: 1, random: 0, retryAfter: .seconds(5)) == .seconds(5))
        #expect(b.delay(afterAttempt: 4, random: 0, retryAfter: .seconds(5)) == .seconds(8))
        #expect(b.delay(afterAttempt: 1, random: 0, retryAfter: .seconds(60)) == .seconds(10))
        #expect(b.delay(afterAttempt: 1, random: 0, retryAfter: .seconds(60), retryAfterCap: .seconds(30)) == .seconds(30))
        #expect(b.delay(afterAttempt: 1, random: 0, retryAfter: nil) == .seconds(1))
        #expect(Backoff(base: .seconds(1)).delay(afterAttempt: 1, random: 0, retryAfter: .seconds(99)) == .seconds(99), "no cap at all")
        #expect(Backoff.retryAfter(seconds: 2.5) == .milliseconds(2500))
        #expect(Backoff.retryAfter(seconds: .infinity) == .seconds(86_400))
        for none in [nil, 0, -1, Double.nan] { #expect(Backoff.retryAfter(seconds: none) == nil) }
    }
}
