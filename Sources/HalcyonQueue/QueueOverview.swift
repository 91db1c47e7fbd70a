import Foundation
import HalcyonRuntime

/// What the dashboard's overview shows, read with bounded work however many rows
/// `halcyon.jobs` holds: every count stops at `cap` (and says so), and the succeeded total of
/// a large table is the planner's estimate rather than a scan. `halcyon status` is the exact,
/// slower view.
public struct QueueOverview: Sendable {
    /// A count that stopped at the cap (`atLeast`), or is estimated from table statistics.
    public struct Count: Sendable, Equatable {
        public enum Kind: String, Sendable { case exact, atLeast = "at_least", estimate }
        public var value: Int
        public var kind: Kind

        public init(_ value: Int, _ kind: Kind = .exact) {
            self.value = value
            self.kind = kind
        }

        public var json: JSONValue { ["value": .number(Double(value)), "kind": .string(kind.rawValue)] }
    }

    public struct Queue: Sendable {
        public var name: String
        public var paused: Bool
        /// Seconds since it was paused.
        public var pausedFor: Double?
        /// Queued, running, failed and cancelled (succeeded is not counted per queue).
        public var counts: [JobState: Count]
        /// Its fleet-wide limits.
        public var limits = QueueLimits()
    }

    public struct Minute: Sendable {
        /// Start of the minute, Unix seconds.
        public var start: Int64
        public var succeeded: Int, failed: Int, cancelled: Int
    }

    public struct Failure: Sendable {
        public var code: String
        public var count: Int
        public var latestMessage: String
        public var lastSeen: String
        public var latestJob: Int64?
    }

    public struct Worker: Sendable {
        public enum Status: String, Sendable { case live, dead, stopped }
        public var id: String
        public var host: String
        public var pid: Int
        public var concurrency: Int
        public var status: Status
        public var heartbeatAge: Double
        public var done: Int64
        public var failed: Int64
        /// Times the supervisor restarted its image process, and what ended the last one.
        public var restarts: Int64 = 0
        public var lastCrash: String?
    }

    public var counts: [JobState: Count]
    public var queues: [Queue]
    public var throughput: [Minute]
    /// True when the last hour held more finished jobs than the chart reads.
    public var throughputCapped: Bool
    public var failures: [Failure]
    public var failuresCapped: Bool
    public var workers: [Worker]
    public var store: QueueStatus.StoreState?
    public var cap: Int

    /// Counts of up to this many rows per state; beyond, "at least".
    public static let defaultCap = 100_000
    /// A table smaller than this is counted exactly (a scan of it stays well under 100 ms).
    public static let exactTableBytes: Int64 = 64 << 20
    /// Queues listed, at most.
    public static let maxQueues = 200

    public static func load(_ connection: PGConnection, cap: Int = defaultCap, deadAfter: Double = 60) async throws -> QueueOverview {
        var totals: [JobState: Int] = [:]
        var perQueue: [String: [JobState: Int]] = [:]
        for row in try await connection.rows(SQL.OverviewCounts(cap: cap + 1)) {
            totals[row.state, default: 0] += row.count
            perQueue[row.queue, default: [:]][row.state, default: 0] += row.count
        }
        let unsuccessful: [JobState] = [.queued, .running, .failed, .cancelled]
        var counts: [JobState: Count] = [:]
        for s in unsuccessful { counts[s] = (totals[s] ?? 0) > cap ? Count(cap, .atLeast) : Count(totals[s] ?? 0) }
        counts[.succeeded] = try await succeeded(connection, others: unsuccessful.reduce(0) { $0 + min(cap, totals[$1] ?? 0) })

        var queues: [Queue] = []
        for row in try await connection.rows(SQL.QueueList(limit: maxQueues)) {
            let seen = perQueue[row.name] ?? [:]
            var c: [JobState: Count] = [:]
            // Under a capped state, a queue's share of the rows read is only a lower bound.
            for s in unsuccessful { c[s] = Count(min(cap, seen[s] ?? 0), (totals[s] ?? 0) > cap && (seen[s] ?? 0) > 0 ? .atLeast : .exact) }
            queues.append(Queue(name: row.name, paused: row.paused, pausedFor: row.pausedFor, counts: c, limits: row.limits))
        }

        let chartCap = 2 * cap
        var minutes: [Minute] = []
        var finished = 0
        for row in try await connection.rows(SQL.ThroughputByMinute(limit: chartCap)) {
            minutes.append(row.minute)
            finished += row.finished
        }

        let failureRows = try await connection.rows(SQL.FailuresByCode(limit: cap))
        let failures = failureRows.map(\.failure)

        let workers = try await connection.rows(SQL.WorkerList(deadAfter: .seconds(deadAfter))).map(\.worker)

        let store = try await QueueStatus.StoreState.latest(connection)

        return QueueOverview(
            counts: counts, queues: queues, throughput: minutes, throughputCapped: finished >= chartCap, failures: failures,
            failuresCapped: failureRows.first?.readRows.map { $0 >= cap } ?? false, workers: workers, store: store,
            cap: cap)
    }

    /// Succeeded rows: counted when the table is small, else the table's estimated row count
    /// (its density at the last ANALYZE times its current size) less the other states.
    private static func succeeded(_ connection: PGConnection, others: Int) async throws -> Count {
        let t = try await connection.row(SQL.TableEstimate())
        let bytes = t?.bytes ?? 0
        if bytes < exactTableBytes {
            return Count(try await connection.row(SQL.SucceededCount())?.n ?? 0)
        }
        let tuples = t?.tuples ?? -1, pages = t?.pages ?? 0, block = t?.block ?? 8192
        // Never analyzed: assume the bench's ~300-byte rows.
        let density = tuples >= 0 && pages > 0 ? tuples / pages : block / 300
        let estimated = Int((density * Double(bytes) / block).rounded())
        return Count(max(0, estimated - others), .estimate)
    }

    public var json: JSONValue {
        func countObject(_ c: [JobState: Count]) -> JSONValue {
            .object(Dictionary(uniqueKeysWithValues: c.map { ($0.key.rawValue, $0.value.json) }))
        }
        return [
            "counts": countObject(counts),
            "cap": .number(Double(cap)),
            "queues": .array(
                queues.map { q in
                    let fields: [String: JSONValue] = [
                        "name": .string(q.name), "paused": .bool(q.paused),
                        "paused_seconds_ago": q.pausedFor.map { .number($0.rounded()) } ?? .null, "counts": countObject(q.counts),
                    ]
                    return .object(fields.merging(q.limits.jsonFields) { $1 })
                }),
            "throughput_last_hour": .array(
                throughput.map { m in
                    [
                        "minute": .string(ISO8601.format(Date(timeIntervalSince1970: Double(m.start)))),
                        "succeeded": .number(Double(m.succeeded)), "failed": .number(Double(m.failed)),
                        "cancelled": .number(Double(m.cancelled)),
                    ]
                }),
            "throughput_capped": .bool(throughputCapped),
            "failures_24h": .array(
                failures.map { f in
                    [
                        "code": .string(f.code), "count": .number(Double(f.count)), "latest_message": .string(f.latestMessage),
                        "last_seen": .string(f.lastSeen), "latest_job": f.latestJob.map { .number(Double($0)) } ?? .null,
                    ]
                }),
            "failures_capped": .bool(failuresCapped),
            "workers": .array(
                workers.map { w in
                    [
                        "id": .string(w.id), "host": .string(w.host), "pid": .number(Double(w.pid)),
                        "concurrency": .number(Double(w.concurrency)), "status": .string(w.status.rawValue),
                        "heartbeat_seconds_ago": .number((w.heartbeatAge * 10).rounded() / 10), "jobs_done": .number(Double(w.done)),
                        "jobs_failed": .number(Double(w.failed)), "restarts": .number(Double(w.restarts)),
                        "last_crash": w.lastCrash.map { .string($0) } ?? .null,
                    ]
                }),
            "store": store.map { st -> JSONValue in
                [
                    "root": .string(st.root), "files": .number(Double(st.files)), "bytes": .number(Double(st.bytes)),
                    "size_limit": st.sizeLimit.map { .number(Double($0)) } ?? .null, "swept_seconds_ago": .number(st.age.rounded()),
                ]
            } ?? .null,
        ]
    }
}
