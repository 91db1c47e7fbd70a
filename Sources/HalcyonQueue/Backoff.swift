import Foundation
import HalcyonRuntime

/// When a transiently failed job runs again: exponential backoff with jitter, capped.
/// Attempt n (1-based) waits `base × 2^(n−1)`, capped at `maximum`, then scaled by a random
/// factor in `[1 − jitter, 1]` so that a burst of failures does not come back in lockstep.
public struct Backoff: Sendable, Equatable {
    /// Delay after the first failed attempt. Default: `defaultBase`.
    public var base: Duration
    /// Upper bound before jitter. Default: `defaultMaximum`.
    public var maximum: Duration
    /// Fraction of the delay that is randomised, 0…1. Default: `defaultJitter`.
    public var jitter: Double

    /// The defaults, said once (`--retry-base` starts from `defaultBase`, and its help states
    /// `defaultMaximum`).
    public static let defaultBase: Duration = .seconds(2)
    public static let defaultMaximum: Duration = .minutes(10)
    public static let defaultJitter = 0.25

    public init(base: Duration = defaultBase, maximum: Duration = defaultMaximum, jitter: Double = defaultJitter) {
        self.base = base
        self.maximum = maximum
        self.jitter = min(max(jitter, 0), 1)
    }

    /// The same without jitter: for a wait that grows with consecutive failures (a reconnect, a
    /// circuit breaker, a restart) rather than a job's attempts.
    public init(doubling base: Duration, upTo maximum: Duration) {
        self.init(base: base, maximum: max(base, maximum), jitter: 0)
    }

    /// The delay after failed attempt `attempt`, with `random` in 0…1.
    public func delay(afterAttempt attempt: Int, random: Double = Double.random(in: 0...1)) -> Duration {
        let exponent = Double(min(max(attempt - 1, 0), 40))
        let raw = min(base.seconds * pow(2, exponent), maximum.seconds)
        return .seconds(raw * (1 - jitter * min(max(random, 0), 1)))
    }
}
