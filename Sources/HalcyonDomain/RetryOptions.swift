import Foundation
import HalcyonRuntime

/// Download retries per source, from `options.retry` (Kingfisher's `DelayRetryStrategy`), and
/// the worker's defaults for jobs that say nothing (`--fetch-retries`, `--fetch-retry-interval`,
/// `--fetch-retry-backoff` start from these). Keys left out take the defaults below.
public struct RetryOptions: Sendable, Equatable {
    public enum Backoff: String, Sendable, CaseIterable { case fixed, accumulated, exponential }
    public var max: Int
    public var interval: Double
    public var backoff: Backoff

    /// The defaults: 2 retries, 0.5 s apart, growing exponentially — the one place they are said.
    public static let defaultMax = 2
    public static let defaultInterval: Duration = .milliseconds(500)
    public static let defaultBackoff = Backoff.exponential
    /// What `max` and `interval` may be, in a job's options and on the command line.
    public static let maxRange = 0...20
    public static let intervalRange: ClosedRange<Duration> = .zero...(.hours(1))

    public init(max: Int = defaultMax, interval: Double = defaultInterval.seconds, backoff: Backoff = defaultBackoff) {
        self.max = max
        self.interval = interval
        self.backoff = backoff
    }
}
