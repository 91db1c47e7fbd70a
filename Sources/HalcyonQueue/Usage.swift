import Foundation
import HalcyonRuntime

/// Usage of one queue (and fair key, and hour) over a period: what its finished attempts cost
/// (migrations/0016_usage.sql, usage.sql). What `halcyon usage` and the dashboard's usage page show.
public struct Usage: Sendable, Equatable {
    public var queue: String
    /// The fair key; "" for the queue's common share, and for every row of a report by queue.
    public var fairKey: String
    /// The hour's start in UTC (`2026-11-28T01:00:00Z`); nil when not by the hour.
    public var hour: String?
    /// Jobs that succeeded, failed and were cancelled while running; attempts that went back to
    /// the queue (a transient failure, an expired lease).
    public var succeeded: Int64 = 0, failed: Int64 = 0, cancelled: Int64 = 0, retried: Int64 = 0
    /// CPU milliseconds by stage (the attempts' `timings`).
    public var decodeCPUms = 0.0, processCPUms = 0.0, encodeCPUms = 0.0, storeCPUms = 0.0
    /// Source bytes downloaded by successful jobs; result bytes written to the store; successes
    /// served from the store.
    public var bytesFetched: Int64 = 0, bytesStored: Int64 = 0, storeHits: Int64 = 0

    public init(queue: String, fairKey: String = "", hour: String? = nil) {
        self.queue = queue
        self.fairKey = fairKey
        self.hour = hour
    }

    /// Jobs that failed or were cancelled while running (saturating).
    public var failedOrCancelled: Int64 {
        let (sum, overflow) = failed.addingReportingOverflow(cancelled)
        return overflow ? .max : sum
    }

    /// CPU milliseconds of every stage.
    public var cpuMs: Double { decodeCPUms + processCPUms + encodeCPUms + storeCPUms }

    /// The sum of `rows`, under `queue` (e.g. "total"). Counts saturate rather than trap (the
    /// table is anyone's with write access).
    public static func total(_ rows: [Usage], queue: String = "total") -> Usage {
        func add(_ a: inout Int64, _ b: Int64) {
            let (sum, overflow) = a.addingReportingOverflow(b)
            a = overflow ? (b < 0 ? .min : .max) : sum
        }
        var t = Usage(queue: queue)
        for u in rows {
            add(&t.succeeded, u.succeeded)
            add(&t.failed, u.failed)
            add(&t.cancelled, u.cancelled)
            add(&t.retried, u.retried)
            t.decodeCPUms += u.decodeCPUms
            t.processCPUms += u.processCPUms
            t.encodeCPUms += u.encodeCPUms
            t.storeCPUms += u.storeCPUms
            add(&t.bytesFetched, u.bytesFetched)
            add(&t.bytesStored, u.bytesStored)
            add(&t.storeHits, u.storeHits)
        }
        return t
    }

    /// `{"queue", "fair_key", "hour", "succeeded", …, "cpu_ms": {"total", "decode", …}, …}`, as
    /// `halcyon usage --json` prints a row (`fair_key` only by key, `hour` only by the hour; a CPU
    /// time that is not a finite number, which only a hand-written row can hold, as null).
    public func json(byFairKey: Bool, hourly: Bool) -> JSONValue {
        func ms(_ v: Double) -> JSONValue { v.isFinite ? .number((v * 10).rounded() / 10) : .null }
        var o: [String: JSONValue] = [
            "queue": .string(queue), "succeeded": .number(Double(succeeded)), "failed": .number(Double(failed)),
            "cancelled": .number(Double(cancelled)), "retried": .number(Double(retried)),
            "cpu_ms": .object([
                "total": ms(cpuMs), "decode": ms(decodeCPUms), "process": ms(processCPUms), "encode": ms(encodeCPUms), "store": ms(storeCPUms),
            ]),
            "bytes_fetched": .number(Double(bytesFetched)), "bytes_stored": .number(Double(bytesStored)),
            "store_hits": .number(Double(storeHits)),
        ]
        if byFairKey { o["fair_key"] = fairKey.isEmpty ? .null : .string(fairKey) }
        if hourly { o["hour"] = hour.map { .string($0) } ?? .null }
        return .object(o)
    }
}

/// Usage per tenant: the roll-up workers run (`LeaseName.usageRollUp`), its retention, and reports.
extension JobQueue {
    /// What one roll-up did: events moved, hours (rows of `halcyon.usage`) they went into.
    public struct UsageRollUp: Sendable, Equatable {
        public var events: Int
        public var hours: Int
        public init(events: Int, hours: Int) {
            self.events = events
            self.hours = hours
        }
    }

    /// Events one roll-up statement moves at most.
    public static let usageRollUpBatch = 50_000

    /// Moves up to `limit` usage events into their hours, in one statement.
    public func rollUpUsage(limit: Int = JobQueue.usageRollUpBatch) async throws -> UsageRollUp {
        try await connection.row(SQL.RollUpUsage(limit: limit))?.rollUp ?? UsageRollUp(events: 0, hours: 0)
    }

    /// Deletes up to `limit` hours of usage that ended more than `olderThan` ago; how many went.
    public func pruneUsage(olderThan: Duration, limit: Int = JobQueue.usageRollUpBatch) async throws -> Int {
        try await connection.row(SQL.PruneUsage(olderThan: olderThan, limit: limit))?.n ?? 0
    }

    /// Usage since `since` (taken back to the start of its hour), per queue, or per queue and
    /// fair key, per hour too when `hourly`, of `queue` only when given: the rolled-up hours plus
    /// the events not rolled up yet.
    public func usage(since: Date, byFairKey: Bool = false, hourly: Bool = false, queue: String? = nil) async throws -> [Usage] {
        try await connection.rows(SQL.UsageReport(since: since, byFairKey: byFairKey, hourly: hourly, queue: queue)).map(\.usage)
    }

    /// `date` taken back to the start of its hour (UTC), as usage reports count from.
    public static func usageHour(_ date: Date) -> Date {
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 / 3600).rounded(.down) * 3600)
    }
}
