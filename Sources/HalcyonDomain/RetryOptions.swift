import Foundation

/// Download retries per source, from `options.retry` (Kingfisher's `DelayRetryStrategy`).
/// Keys left out take these defaults: 2 retries, 0.5 s, exponential.
public struct RetryOptions: Sendable, Equatable {
    public enum Backoff: String, Sendable, CaseIterable { case fixed, accumulated, exponential }
    public var max: Int
    public var interval: Double
    public var backoff: Backoff

    public init(max: Int = 2, interval: Double = 0.5, backoff: Backoff = .exponential) {
        self.max = max
        self.interval = interval
        self.backoff = backoff
    }
}
