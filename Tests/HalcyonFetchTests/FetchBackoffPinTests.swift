import HalcyonDomain
import HalcyonFetch
import Testing

/// The waits of downloads' retries per source before there was one back-off: pinned, so that
/// moving them onto it changes none of them (seconds within a nanosecond).
@Suite struct FetchBackoffPinTests {
    let transient = HalcyonError(.httpStatus, "HTTP 503", permanent: false)

    func same(_ got: [Double?], _ expected: [Double?]) -> Bool {
        got.count == expected.count
            && zip(got, expected).allSatisfy { a, b in
                switch (a, b) {
                case (nil, nil): true
                case (let a?, let b?): abs(a - b) < 1e-9
                default: false
                }
            }
    }

    /// The default (`RetryOptions()`: two retries, 0.5 s, exponential, a quarter of jitter).
    @Test func theDefault() {
        let s = DelayRetryStrategy(RetryOptions())
        #expect(same([1, 2, 3].map { s.delay(beforeRetry: $0, after: transient, random: 0) }, [0.5, 1, nil]))
        #expect(same([1, 2].map { s.delay(beforeRetry: $0, after: transient, random: 0.5) }, [0.4375, 0.875]))
        #expect(same([1, 2].map { s.delay(beforeRetry: $0, after: transient, random: 1) }, [0.375, 0.75]))
    }

    /// Kingfisher's three intervals: fixed t, accumulated n × t, exponential t × 2ⁿ⁻¹ (uncapped;
    /// only the exponential one jittered).
    @Test func theIntervals() {
        let retries = Array(1...5)
        let fixed = DelayRetryStrategy(maxRetries: 5, interval: .fixed(0.3))
        #expect(same(retries.map { fixed.delay(beforeRetry: $0, after: transient, random: 1) }, [0.3, 0.3, 0.3, 0.3, 0.3]))
        let accumulated = DelayRetryStrategy(maxRetries: 5, interval: .accumulated(0.3))
        #expect(same(retries.map { accumulated.delay(beforeRetry: $0, after: transient, random: 1) }, [0.3, 0.6, 0.9, 1.2, 1.5]))
        let exponential = DelayRetryStrategy(maxRetries: 20, interval: .exponential(0.1))
        #expect(same(retries.map { exponential.delay(beforeRetry: $0, after: transient, random: 0) }, [0.1, 0.2, 0.4, 0.8, 1.6]))
        #expect(same(retries.map { exponential.delay(beforeRetry: $0, after: transient, random: 1) }, [0.075, 0.15, 0.3, 0.6, 1.2]))
        #expect(same([exponential.delay(beforeRetry: 20, after: transient, random: 0)], [52_428.8]), "no cap")
        let hour = DelayRetryStrategy(RetryOptions(max: 20, interval: 3600, backoff: .exponential))
        #expect(same([hour.delay(beforeRetry: 20, after: transient, random: 0)], [1_887_436_800]))
        #expect(same([DelayRetryStrategy(maxRetries: 3, interval: .fixed(0)).delay(beforeRetry: 1, after: transient, random: 0)], [0]))
    }

    /// A server's Retry-After wins when longer, up to `retryAfterCap` (30 s by default).
    @Test func retryAfter() {
        let s = DelayRetryStrategy(maxRetries: 3, interval: .exponential(1))
        var e = transient
        let cases: [(Int, Double?, Double)] = [
            (1, 5, 5), (3, 5, 5), (3, 2, 4), (1, 3600, 30), (1, 0.1, 1), (1, 0, 1), (1, -3, 1), (1, .nan, 1), (1, .infinity, 30),
        ]
        for (retry, after, expected) in cases {
            e.retryAfter = after
            #expect(same([s.delay(beforeRetry: retry, after: e, random: 0)], [expected]), "\(retry) \(String(describing: after))")
        }
        e.retryAfter = 100
        #expect(same([DelayRetryStrategy(maxRetries: 1, interval: .fixed(1), retryAfterCap: 60).delay(beforeRetry: 1, after: e, random: 0)], [60]))
    }
}
