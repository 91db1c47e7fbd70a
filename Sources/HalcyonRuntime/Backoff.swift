import Foundation

/// How long to wait before trying again, failure after failure: Halcyon's one back-off, for a
/// job's retries, the database's reconnections, a download's retries of one source (Kingfisher's
/// intervals), S3 requests, webhook deliveries, a webhook host's open circuit and a crashed
/// worker process's restarts.
///
/// After failed attempt n (1-based) the wait grows from `base` (t) as `growth` says — `fixed`
/// t, `accumulated` n·t, `exponential` t·2ⁿ⁻¹ — is capped at `maximum` when there is one, then
/// jittered with a random draw r in 0…1 as `jitter` says: `none`; `fraction(j)`, d·(1 − j·r),
/// shortened by up to that fraction of itself (so a burst of failures does not come back in
/// lockstep, and never waits longer than d); `full`, r·d, anywhere from nothing to d (AWS's
/// "full jitter"). `delay(afterAttempt:random:)` takes the draw, for tests.
public struct Backoff: Sendable, Equatable {
    /// How the wait grows with the attempts (Kingfisher's `DelayRetryStrategy.Interval`).
    public enum Growth: Sendable, Equatable {
        /// `base` every time.
        case fixed
        /// n × `base` after attempt n.
        case accumulated
        /// `base` × 2ⁿ⁻¹ after attempt n: doubling.
        case exponential
    }

    /// How much of the wait is left to chance.
    public enum Jitter: Sendable, Equatable {
        /// None: the wait is what the growth and the cap make it.
        case none
        /// Shortened by up to this fraction (0…1) of itself: d·(1 − fraction·r).
        case fraction(Double)
        /// Anywhere in 0…d: r·d.
        case full
    }

    /// The first wait (before growth and jitter).
    public var base: Duration
    public var growth: Growth
    /// The longest wait before jitter; nil: no cap.
    public var maximum: Duration?
    public var jitter: Jitter

    /// A back-off from `base`, doubling unless `growth` says otherwise, capped at `maximum`
    /// (nil: never), jittered as `jitter` says.
    public init(base: Duration, growth: Growth = .exponential, maximum: Duration? = nil, jitter: Jitter = .none) {
        self.base = base
        self.growth = growth
        self.maximum = maximum
        self.jitter = jitter
    }

    /// `base` doubling up to `maximum` (or `base`, when that is longer), without jitter: for a wait
    /// that grows with consecutive failures (a reconnection, a circuit breaker, a restart) rather
    /// than a fleet's retries.
    public init(doubling base: Duration, upTo maximum: Duration) {
        self.init(base: base, maximum: max(base, maximum))
    }

    /// Doublings past which `exponential` grows no further (2⁴⁰ × a nanosecond is 18 minutes; a
    /// cap stops it long before).
    static let maxDoublings = 40

    /// The wait after failed attempt `attempt` (1-based; less counts as 1) before jitter: grown
    /// from `base`, capped at `maximum`.
    public func ceiling(afterAttempt attempt: Int) -> Duration {
        .seconds(ceilingSeconds(attempt))
    }

    private func ceilingSeconds(_ attempt: Int) -> Double {
        let n = max(attempt, 1)
        let t = base.seconds
        let grown: Double =
            switch growth {
            case .fixed: t
            case .accumulated: t * Double(n)
            case .exponential: t * pow(2, Double(min(n - 1, Self.maxDoublings)))
            }
        return maximum.map { min(grown, $0.seconds) } ?? grown
    }

    /// The wait after failed attempt `attempt` (1-based), with a random draw.
    public func delay(afterAttempt attempt: Int) -> Duration {
        delay(afterAttempt: attempt, random: Double.random(in: 0...1))
    }

    /// The wait after failed attempt `attempt` (1-based) with the draw `random` (held to 0…1):
    /// the one formula, deterministic for tests.
    public func delay(afterAttempt attempt: Int, random: Double) -> Duration {
        let ceiling = ceilingSeconds(attempt)
        let r = min(max(random, 0), 1)
        return switch jitter {
        case .none: .seconds(ceiling)
        case .fraction(let fraction): .seconds(ceiling * (1 - min(max(fraction, 0), 1) * r))
        case .full: .seconds(ceiling * r)
        }
    }

    /// The wait after failed attempt `attempt` when the other side said how long to wait
    /// (`Retry-After`): the longer of the two, the server's held to `retryAfterCap` (nil:
    /// `maximum`, and no bound when there is none either). With a random draw.
    public func delay(afterAttempt attempt: Int, retryAfter: Duration?, retryAfterCap: Duration? = nil) -> Duration {
        delay(afterAttempt: attempt, random: Double.random(in: 0...1), retryAfter: retryAfter, retryAfterCap: retryAfterCap)
    }

    /// `delay(afterAttempt:retryAfter:retryAfterCap:)` with the draw `random`, for tests.
    public func delay(afterAttempt attempt: Int, random: Double, retryAfter: Duration?, retryAfterCap: Duration? = nil) -> Duration {
        let own = delay(afterAttempt: attempt, random: random)
        guard let retryAfter, retryAfter > .zero else { return own }
        guard let cap = retryAfterCap ?? maximum else { return max(own, retryAfter) }
        return max(own, min(retryAfter, cap))
    }

    /// A server's `Retry-After` in seconds as a wait: nil unless it is a positive number (not
    /// NaN); at most a day (an infinite one is a day, which a cap then shortens).
    public static func retryAfter(seconds: Double?) -> Duration? {
        guard let seconds, seconds > 0 else { return nil }
        return .seconds(min(seconds, 86_400))
    }
}
