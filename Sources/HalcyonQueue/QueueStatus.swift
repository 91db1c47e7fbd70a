import Foundation
import HalcyonRuntime

/// What an operator asks first, gathered in a few queries: counts by state, what is runnable
/// versus waiting for a retry, the oldest runnable age, throughput, failures, workers.
public struct QueueStatus: Sendable {
    public var counts: [(state: String, count: Int)]
    public var runnable: Int
    public var scheduled: Int
    /// Seconds the oldest runnable job has waited, nil when none.
    public var oldestRunnableAge: Double?
    public var finishedLast1m: Int
    public var finishedLast5m: Int
    public var finishedLast15m: Int
    public var failures: [(code: String, count: Int, latestMessage: String, lastSeen: String)]
    public var workers: [[String: String?]]
    /// The store as the latest sweep left it (nil: never swept).
    public var store: StoreState?
    /// Every queue: paused or not, and its jobs by state.
    public var queues: [QueueState]
    /// The latest retention run (nil: none).
    public var lastPrune: PruneState?
    /// With a tag asked for: its jobs by state.
    public var tag: (name: String, counts: [(state: String, count: Int)])?

    public struct QueueState: Sendable {
        public var name: String
        public var paused: Bool
        /// Seconds since it was paused.
        public var pausedFor: Double?
        /// Its fleet-wide limits.
        public var limits = QueueLimits()
        public var counts: [String: Int]
    }

    public struct PruneState: Sendable {
        public var prunedBy: String
        public var succeeded: Int, failed: Int, cancelled: Int
        /// Seconds since that run.
        public var age: Double
    }

    public struct StoreState: Sendable {
        public var root: String
        public var files: Int64
        public var bytes: Int64
        public var sizeLimit: Int64?
        public var sweptBy: String
        /// Seconds since that sweep.
        public var age: Double

        /// The store as the latest sweep recorded it; nil when none has.
        static func latest(_ connection: PGConnection) async throws -> StoreState? {
            try await connection.row(SQL.LatestSweep())?.store
        }
    }

    /// A worker without a heartbeat for this many seconds counts as dead.
    public static func load(_ connection: PGConnection, deadAfter: Double = 60, tag: String? = nil) async throws -> QueueStatus {
        // One scan gives both the per-queue and the overall counts.
        var queues: [QueueState] = []
        for row in try await connection.rows(SQL.QueueCounts()) {
            if queues.last?.name != row.queue {
                queues.append(QueueState(name: row.queue, paused: row.paused, pausedFor: row.pausedFor, limits: row.limits, counts: [:]))
            }
            if let state = row.state { queues[queues.count - 1].counts[state] = row.count }
        }
        let counts = JobState.allCases.map { s in (s.rawValue, queues.reduce(0) { $0 + ($1.counts[s.rawValue] ?? 0) }) }
        let lastPrune = try await connection.row(SQL.LatestPrune())?.prune
        var tagged: (String, [(String, Int)])?
        if let tag {
            let byState = Dictionary(
                try await connection.rows(SQL.TagCounts(tag: tag)).map { ($0.state, $0.count) }, uniquingKeysWith: { a, _ in a })
            tagged = (tag, JobState.allCases.map { ($0.rawValue, byState[$0.rawValue] ?? 0) })
        }
        let queue = try await connection.row(SQL.QueueDetail())
        let windows = try await connection.row(SQL.ThroughputWindows())
        let failures = try await connection.rows(SQL.RecentFailures())
        // As text, column by column (`workers` is what the status report and its JSON print).
        let workers = try await connection.result(SQL.WorkerList(deadAfter: .seconds(deadAfter)))
        let store = try await StoreState.latest(connection)
        return QueueStatus(
            counts: counts,
            runnable: queue?.runnable ?? 0, scheduled: queue?.scheduled ?? 0, oldestRunnableAge: queue?.oldestAge,
            finishedLast1m: windows?.m1 ?? 0, finishedLast5m: windows?.m5 ?? 0, finishedLast15m: windows?.m15 ?? 0,
            failures: failures.map(\.failure), workers: workers.dictionaries, store: store, queues: queues, lastPrune: lastPrune, tag: tagged)
    }

    public var json: JSONValue {
        var countObject: [String: JSONValue] = [:]
        for c in counts { countObject[c.state] = .number(Double(c.count)) }
        return [
            "counts": .object(countObject),
            "queued": [
                "runnable": .number(Double(runnable)), "scheduled": .number(Double(scheduled)),
                "oldest_runnable_age_seconds": oldestRunnableAge.map { .number(($0 * 10).rounded() / 10) } ?? .null,
            ],
            "throughput": [
                "finished_last_1m": .number(Double(finishedLast1m)), "finished_last_5m": .number(Double(finishedLast5m)),
                "finished_last_15m": .number(Double(finishedLast15m)),
                "per_second_last_1m": .number((Double(finishedLast1m) / 60 * 100).rounded() / 100),
            ],
            "failures_24h": .array(
                failures.map {
                    [
                        "code": .string($0.code), "count": .number(Double($0.count)), "latest_message": .string($0.latestMessage),
                        "last_seen": .string($0.lastSeen),
                    ]
                }),
            "store": store.map { st -> JSONValue in
                [
                    "root": .string(st.root), "files": .number(Double(st.files)), "bytes": .number(Double(st.bytes)),
                    "size_limit": st.sizeLimit.map { .number(Double($0)) } ?? .null, "swept_by": .string(st.sweptBy),
                    "swept_seconds_ago": .number(st.age.rounded()),
                ]
            } ?? .null,
            "queues": .array(
                queues.map { q in
                    let fields: [String: JSONValue] = [
                        "name": .string(q.name), "paused": .bool(q.paused),
                        "paused_seconds_ago": q.pausedFor.map { .number($0.rounded()) } ?? .null,
                        "counts": .object(
                            Dictionary(uniqueKeysWithValues: JobState.allCases.map { ($0.rawValue, .number(Double(q.counts[$0.rawValue] ?? 0))) })),
                    ]
                    return .object(fields.merging(q.limits.jsonFields) { $1 })
                }),
            "last_prune": lastPrune.map { p -> JSONValue in
                [
                    "pruned_by": .string(p.prunedBy), "succeeded": .number(Double(p.succeeded)), "failed": .number(Double(p.failed)),
                    "cancelled": .number(Double(p.cancelled)), "seconds_ago": .number(p.age.rounded()),
                ]
            } ?? .null,
            "tag": tag.map { t -> JSONValue in
                [
                    "name": .string(t.name),
                    "counts": .object(Dictionary(uniqueKeysWithValues: t.counts.map { ($0.state, .number(Double($0.count))) })),
                ]
            } ?? .null,
            "workers": .array(
                workers.map { w in
                    .object(
                        Dictionary(
                            uniqueKeysWithValues: w.map { k, v -> (String, JSONValue) in
                                guard let v else { return (k, .null) }
                                if ["pid", "concurrency", "jobs_done", "jobs_failed", "restarts", "heartbeat_age"].contains(k), let n = Double(v) {
                                    return (k, .number((n * 10).rounded() / 10))
                                }
                                return (k, .string(v))
                            }))
                }),
        ]
    }
}
