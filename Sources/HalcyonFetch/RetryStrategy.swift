import Foundation
import HalcyonDomain
import HalcyonRuntime

/// Decides whether and when a failed download of one source is tried again (Kingfisher's
/// `RetryStrategy`).
public protocol RetryStrategy: Sendable {
    /// Seconds to wait before retry number `retry` (1-based) after `error`, or nil to give up
    /// on this source.
    func delay(beforeRetry retry: Int, after error: HalcyonError) -> Double?
}

/// Kingfisher's `DelayRetryStrategy`: up to `maxRetries` retries with an interval that is
/// fixed, accumulated (n × t) or exponential (t × 2ⁿ⁻¹, with jitter). A server's
/// `Retry-After` wins when it is longer, up to `retryAfterCap`. Only failures that can
/// succeed later are retried: timeouts, connection errors, 408, 429 and 5xx — never other
/// 4xx, blocked addresses, oversized bodies or non-images.
public struct DelayRetryStrategy: RetryStrategy, Equatable {
    public enum Interval: Sendable, Equatable {
        case fixed(Double)
        case accumulated(Double)
        case exponential(Double)

        /// Its seconds (the first interval).
        public var seconds: Double {
            switch self {
            case .fixed(let s), .accumulated(let s), .exponential(let s): s
            }
        }
    }

    public var maxRetries: Int
    public var interval: Interval
    /// Longest `Retry-After` honoured, in seconds.
    public var retryAfterCap: Double
    /// Fraction of an exponential interval that is randomised away.
    public var jitter: Double

    public init(maxRetries: Int, interval: Interval, retryAfterCap: Double = 30, jitter: Double = 0.25) {
        self.maxRetries = maxRetries
        self.interval = interval
        self.retryAfterCap = retryAfterCap
        self.jitter = jitter
    }

    /// The strategy a job's `options.retry` asks for.
    public init(_ options: RetryOptions, retryAfterCap: Double = 30) {
        let interval: Interval =
            switch options.backoff {
            case .fixed: .fixed(options.interval)
            case .accumulated: .accumulated(options.interval)
            case .exponential: .exponential(options.interval)
            }
        self.init(maxRetries: options.max, interval: interval, retryAfterCap: retryAfterCap)
    }

    public func delay(beforeRetry retry: Int, after error: HalcyonError) -> Double? {
        delay(beforeRetry: retry, after: error, random: Double.random(in: 0...1))
    }

    /// `delay` with the jitter's random draw given, for tests.
    public func delay(beforeRetry retry: Int, after error: HalcyonError, random: Double) -> Double? {
        guard retry >= 1, retry <= maxRetries, !error.permanent else { return nil }
        return backoff.delay(
            afterAttempt: retry, random: random, retryAfter: Backoff.retryAfter(seconds: error.retryAfter), retryAfterCap: .seconds(retryAfterCap)
        ).seconds
    }

    /// The waits `interval` and `jitter` make: from the interval's seconds, fixed, accumulated or
    /// exponential (only that one jittered), uncapped (`maxRetries` bounds them).
    public var backoff: Backoff {
        switch interval {
        case .fixed(let t): Backoff(base: .seconds(t), growth: .fixed)
        case .accumulated(let t): Backoff(base: .seconds(t), growth: .accumulated)
        case .exponential(let t): Backoff(base: .seconds(t), growth: .exponential, jitter: .fraction(jitter))
        }
    }
}
