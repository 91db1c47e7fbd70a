import Foundation
import HalcyonRuntime

/// A queue's fleet-wide limits (`halcyon.queues.max_running`, `max_per_second`,
/// `max_running_per_key`): nil is no limit. Every worker's claim obeys them (claim.sql).
public struct QueueLimits: Sendable, Equatable {
    /// At most this many of the queue's jobs running at once across every worker.
    public var maxRunning: Int?
    /// At most this many claims a second, smoothed by a bucket of one second's worth.
    public var maxPerSecond: Double?
    /// At most this many running jobs of any one fair key (the common share counts as one key).
    public var maxRunningPerKey: Int?

    /// The limits in words (`at most 2 running, 5 a second`), nil when there are none: what
    /// `halcyon status`, `halcyon limit` and the dashboard show.
    public var summary: String? {
        guard !isEmpty else { return nil }
        var parts: [String] = []
        if let n = maxRunning { parts.append("at most \(n) running") }
        if let r = maxPerSecond { parts.append("\(r.formatted(.number.precision(.fractionLength(0...3)))) a second") }
        if let n = maxRunningPerKey { parts.append("at most \(n) running per fair key") }
        return parts.joined(separator: ", ")
    }

    /// The limits as JSON fields (`max_running`, `max_per_second`, `max_running_per_key`; null
    /// for none), for `halcyon status --json` and the dashboard's API.
    public var jsonFields: [String: JSONValue] {
        [
            "max_running": maxRunning.map { .number(Double($0)) } ?? .null, "max_per_second": maxPerSecond.map { .number($0) } ?? .null,
            "max_running_per_key": maxRunningPerKey.map { .number(Double($0)) } ?? .null,
        ]
    }

    public static let runningRange = 1...1_000_000
    public static let perSecondRange = 0.001...100_000.0

    public init(maxRunning: Int? = nil, maxPerSecond: Double? = nil, maxRunningPerKey: Int? = nil) {
        self.maxRunning = maxRunning
        self.maxPerSecond = maxPerSecond
        self.maxRunningPerKey = maxRunningPerKey
    }

    /// No limit at all.
    public var isEmpty: Bool { maxRunning == nil && maxPerSecond == nil && maxRunningPerKey == nil }

    /// The limits' problems, each naming its limit and the range it must be in (the same ranges
    /// as the table's CHECK constraints and `halcyon.set_queue_limits`).
    public func validate() throws {
        if let n = maxRunning, !Self.runningRange.contains(n) {
            throw QueueLimitsError(limit: "max_running", reason: "must be 1 to 1000000, not \(n) (none: no limit; to stop claims, pause the queue)")
        }
        if let r = maxPerSecond, r.isNaN || !Self.perSecondRange.contains(r) {
            throw QueueLimitsError(limit: "max_per_second", reason: "must be 0.001 to 100000, not \(r) (none: no limit)")
        }
        if let n = maxRunningPerKey, !Self.runningRange.contains(n) {
            throw QueueLimitsError(limit: "max_running_per_key", reason: "must be 1 to 1000000, not \(n) (none: no limit)")
        }
    }
}

/// A queue with fleet-wide limits, read now: its limits and its jobs running across every worker.
public struct LimitedQueue: Sendable, Equatable {
    public var queue: String
    public var limits: QueueLimits
    public var running: Int

    public init(queue: String, limits: QueueLimits, running: Int) {
        self.queue = queue
        self.limits = limits
        self.running = running
    }
}

/// A queue limit out of range.
public struct QueueLimitsError: Error, CustomStringConvertible, Equatable {
    public var limit: String
    public var reason: String
    public var description: String { "\(limit) \(reason)" }
}

/// A job's fair key (`halcyon.jobs.fair_key`): whose share of its queue it is taken from.
public enum FairKey {
    public static let maxBytes = 200

    /// Why `key` cannot be a fair key, or nil.
    public static func problem(_ key: String) -> String? {
        guard (1...maxBytes).contains(key.utf8.count) else {
            return "a fair key has 1 to \(maxBytes) bytes (got \(key.utf8.count)); leave it out for the queue's common share"
        }
        return nil
    }
}
