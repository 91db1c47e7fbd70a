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

    /// These counts less `other`'s (saturating: the table is anyone's with write access).
    func less(_ other: Usage) -> Usage {
        func minus(_ a: Int64, _ b: Int64) -> Int64 {
            let (difference, overflow) = a.subtractingReportingOverflow(b)
            return overflow ? (b < 0 ? .max : .min) : difference
        }
        var u = self
        u.succeeded = minus(succeeded, other.succeeded)
        u.failed = minus(failed, other.failed)
        u.cancelled = minus(cancelled, other.cancelled)
        u.retried = minus(retried, other.retried)
        u.decodeCPUms -= other.decodeCPUms
        u.processCPUms -= other.processCPUms
        u.encodeCPUms -= other.encodeCPUms
        u.storeCPUms -= other.storeCPUms
        u.bytesFetched = minus(bytesFetched, other.bytesFetched)
        u.bytesStored = minus(bytesStored, other.bytesStored)
        u.storeHits = minus(storeHits, other.storeHits)
        return u
    }

    /// CPU milliseconds of every stage.
    public var cpuMs: Double { decodeCPUms + processCPUms + encodeCPUms + storeCPUms }

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

    /// Moves up to `limit` usage events into their hours and the totals of the windows they fall
    /// in, in one statement, after locking the windows (`lockUsageWindows`) in its transaction.
    public func rollUpUsage(limit: Int = JobQueue.usageRollUpBatch) async throws -> UsageRollUp {
        try await connection.withLocked { c in
            try c.transactionLocked {
                _ = try c.rowsLocked(SQL.LockUsageWindows())
                return try c.rowLocked(SQL.RollUpUsage(limit: limit))?.rollUp ?? UsageRollUp(events: 0, hours: 0)
            }
        }
    }

    /// A window of running totals (`halcyon.usage_windows`): the last `span` of usage per queue
    /// and fair key, kept by the roll-up so that a report over many keys reads one page of them.
    public struct UsageWindow: Sendable, Equatable {
        /// Its name (`24h`, `7d`), and how far back it reaches.
        public var period: String
        public var span: Duration
        /// The first hour its totals count; nil while not built.
        public var since: Date?
        /// The first hour it should count now: the hour `span` ago.
        public var target: Date

        /// What the upkeep does to it, keeping hours for `retain`.
        public func upkeep(retain: Duration) -> UsageWindowUpkeep.Action {
            // A window longer than the retention would count hours the prune deletes.
            if span > retain { return since == nil ? .none : .clear }
            guard let since, since <= target else { return .build }
            return since < target ? .slide : .none
        }
    }

    /// What one upkeep of the windows did, per window.
    public struct UsageWindowUpkeep: Sendable, Equatable {
        /// `rebuild`: moved on, found not to agree with its hours any more, built again.
        public enum Action: String, Sendable { case none, build, slide, clear, rebuild }
        public struct Step: Sendable, Equatable {
            public var period: String
            public var action: Action
            /// Totals (keys) built, or deleted by a slide or clear; hours subtracted by a slide.
            public var totals = 0, hours = 0
        }
        public var steps: [Step] = []
        public init() {}
        /// Whether any window changed.
        public var changed: Bool { steps.contains { $0.action != .none } }
    }

    /// How long building one window may take (one statement over its hours; 300,000 keys take
    /// about 15 s), where other statements get `--statement-timeout`.
    public static let usageWindowBuildTimeout: Duration = .seconds(600)

    /// Builds, moves on or clears the usage windows (`UsageWindow.upkeep`), in one transaction
    /// that holds their lock: no roll-up adds to them meanwhile, and a report sees either the
    /// windows before or after. What the roll-up service runs before rolling up.
    public func keepUsageWindows(retain: Duration) async throws -> UsageWindowUpkeep {
        try await connection.withLocked { c in
            try c.transactionLocked {
                var upkeep = UsageWindowUpkeep()
                /// Empties the window and fills it from its hours; how many keys it holds.
                func build(_ period: String) throws -> Int {
                    _ = try c.rowLocked(SQL.ClearUsageWindow(period: period))
                    return try c.rowLocked(SQL.BuildUsageWindow(period: period), timeout: Self.usageWindowBuildTimeout.seconds)?.n ?? 0
                }
                for window in try c.rowsLocked(SQL.LockUsageWindows()).map(\.window) {
                    var step = UsageWindowUpkeep.Step(period: window.period, action: window.upkeep(retain: retain))
                    switch step.action {
                    case .none: break
                    case .clear:
                        step.totals = try c.rowLocked(SQL.ClearUsageWindow(period: window.period))?.n ?? 0
                    case .build:
                        step.totals = try build(window.period)
                    case .slide:
                        let slid = try c.rowLocked(SQL.SlideUsageWindow(period: window.period))
                        (step.hours, step.totals) = (slid?.hours ?? 0, slid?.totals ?? 0)
                        // Once an hour: still the sums of its hours? (Not when something else wrote them.)
                        if try c.rowLocked(SQL.UsageWindowAgrees(period: window.period))?.agrees == false {
                            step.action = .rebuild
                            step.totals = try build(window.period)
                        }
                    case .rebuild: break
                    }
                    upkeep.steps.append(step)
                }
                if upkeep.steps.contains(where: { $0.action == .build || $0.action == .rebuild }) { try c.runLocked(SQL.AnalyzeUsageTotals()) }
                return upkeep
            }
        }
    }

    /// Deletes up to `limit` hours of usage that ended more than `olderThan` ago; how many went.
    public func pruneUsage(olderThan: Duration, limit: Int = JobQueue.usageRollUpBatch) async throws -> Int {
        try await connection.row(SQL.PruneUsage(olderThan: olderThan, limit: limit))?.n ?? 0
    }

    /// One page of usage (`UsageRequest`): its rows, in its order, and the sums of the rows
    /// not on it and of all — summed in the database, so only the page is read whatever the
    /// number of keys.
    ///
    /// A report by fair key over every key of the last 24 hours or 7 days (`since` the hour a
    /// window counts from, not by the hour) reads the window's totals (`UsageReport.fromTotals`);
    /// others, and any while that window is not built or has not moved on to the current hour
    /// yet, sum the hours. `totals: false` always sums the hours (what the totals are checked
    /// against).
    public func usage(_ request: UsageRequest, totals: Bool = true) async throws -> UsageReport {
        var report = UsageReport(request: request)
        var rows: [SQL.UsageReport.Row] = []
        if totals, request.byFairKey, !request.hourly, request.fairKey == nil {
            rows = try await connection.rows(SQL.UsageTotalsReport(request: request))
            report.fromTotals = !rows.isEmpty
        }
        if rows.isEmpty { rows = try await connection.rows(SQL.UsageReport(request: request)) }
        for row in rows {
            switch row.kind {
            case .row: report.rows.append(row.usage)
            case .total: (report.total, report.totalRows) = (row.usage, row.count)
            }
        }
        report.others = report.rows.reduce(report.total) { $0.less($1) }
        report.others.queue = "others"
        report.otherRows = max(0, report.totalRows - Int64(report.rows.count))
        return report
    }

    /// `date` taken back to the start of its hour (UTC), as usage reports count from.
    public static func usageHour(_ date: Date) -> Date {
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 / 3600).rounded(.down) * 3600)
    }
}

/// What a usage report asks for: a period, a grouping, filters, an order and a page.
public struct UsageRequest: Sendable, Equatable {
    /// The order of the rows: largest first by a measure, or by queue, fair key and hour (`key`).
    public enum Sort: String, Sendable, CaseIterable {
        case cpu, succeeded, failed, fetched, stored, key
    }

    /// From the start of this instant's hour (usage is kept by the hour).
    public var since: Date
    /// One row per queue and fair key (false: per queue); per hour too when `hourly`.
    public var byFairKey: Bool
    public var hourly: Bool
    /// Only this queue; only this fair key ("" is the common share).
    public var queue: String?
    public var fairKey: String?
    public var sort: Sort
    /// Rows on the page (1…`maxLimit`), after skipping `offset` (0…`maxOffset`).
    public var limit: Int
    public var offset: Int

    /// The most rows one page holds.
    public static let maxLimit = 100_000
    /// The most rows a page skips: the database sorts `offset + limit` rows to find a page.
    public static let maxOffset = 1_000_000

    public init(
        since: Date, byFairKey: Bool = false, hourly: Bool = false, queue: String? = nil, fairKey: String? = nil, sort: Sort = .key,
        limit: Int = 1000, offset: Int = 0
    ) {
        self.since = since
        self.byFairKey = byFairKey
        self.hourly = hourly
        self.queue = queue
        self.fairKey = fairKey
        self.sort = sort
        self.limit = limit
        self.offset = offset
    }

    /// Why the request cannot be answered, or nil.
    public var problem: String? {
        guard (1...Self.maxLimit).contains(limit) else { return "limit must be from 1 to \(Self.maxLimit); got \(limit)" }
        guard (0...Self.maxOffset).contains(offset) else { return "offset must be from 0 to \(Self.maxOffset); got \(offset)" }
        return nil
    }
}

/// One page of a usage report: its rows, and the sums of the rows not on it and of all.
public struct UsageReport: Sendable, Equatable {
    public var request: UsageRequest
    public var rows: [Usage] = []
    /// The sum of the rows not on this page (before and after it), and how many there are.
    public var others = Usage(queue: "others")
    public var otherRows: Int64 = 0
    /// The sum of every row, and how many there are.
    public var total = Usage(queue: "total")
    public var totalRows: Int64 = 0
    /// Whether it was read from a window's running totals (`halcyon.usage_totals`) rather than
    /// summed from the hours: the same rows either way.
    public var fromTotals = false

    public init(request: UsageRequest) { self.request = request }

    /// Whether rows follow this page; the offset of the next page, when they do.
    public var more: Bool { Int64(request.offset) + Int64(rows.count) < totalRows }
    public var nextOffset: Int? { more ? request.offset + rows.count : nil }

    /// `{"rows", "total_rows", "more", "next_offset", "others", "total"}` — each row as
    /// `Usage.json` writes it; `others` and `total` with their row counts (`rows`).
    public func json() -> JSONValue {
        func sum(_ u: Usage, rows: Int64) -> JSONValue {
            guard case .object(var o) = u.json(byFairKey: false, hourly: false) else { return .null }
            o["queue"] = nil
            o["rows"] = .number(Double(rows))
            return .object(o)
        }
        return .object([
            "rows": .array(rows.map { $0.json(byFairKey: request.byFairKey, hourly: request.hourly) }),
            "total_rows": .number(Double(totalRows)), "more": .bool(more), "next_offset": nextOffset.map { .number(Double($0)) } ?? .null,
            "offset": .number(Double(request.offset)), "limit": .number(Double(request.limit)), "sort": .string(request.sort.rawValue),
            "others": sum(others, rows: otherRows), "total": sum(total, rows: totalRows),
        ])
    }
}
