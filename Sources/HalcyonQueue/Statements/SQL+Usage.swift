import Foundation
import HalcyonRuntime

// usage.sql: usage per queue and fair key — its roll-up, retention and reports.

extension SQL {
    struct RollUpUsage: Query {
        static let name = "rollUpUsage"
        var limit: Int
        func bind(_ p: inout QueryParameters) { p.add(limit) }

        struct Row: QueryRow {
            static let columns = ["events", "hours"]
            var rollUp: JobQueue.UsageRollUp
            init?(_ row: RowReader) {
                rollUp = JobQueue.UsageRollUp(events: row.int("events") ?? 0, hours: row.int("hours") ?? 0)
            }
        }
    }

    struct PruneUsage: Query {
        typealias Row = CountRow
        static let name = "pruneUsage"
        var olderThan: Duration
        var limit: Int
        func bind(_ p: inout QueryParameters) {
            p.add(olderThan)
            p.add(limit)
        }
    }

    struct LockUsageWindows: Query {
        static let name = "lockUsageWindows"

        struct Row: QueryRow {
            static let columns = ["period", "span", "since", "target"]
            var window: JobQueue.UsageWindow
            init?(_ row: RowReader) {
                guard let period = row.text("period"), let span = row.double("span"), let target = row.double("target") else { return nil }
                window = JobQueue.UsageWindow(
                    period: period, span: .seconds(span), since: row.double("since").map { Date(timeIntervalSince1970: $0) },
                    target: Date(timeIntervalSince1970: target))
            }
        }
    }

    struct ClearUsageWindow: Query {
        typealias Row = CountRow
        static let name = "clearUsageWindow"
        var period: String
        func bind(_ p: inout QueryParameters) { p.add(period) }
    }

    struct BuildUsageWindow: Query {
        typealias Row = CountRow
        static let name = "buildUsageWindow"
        var period: String
        func bind(_ p: inout QueryParameters) { p.add(period) }
    }

    struct UsageWindowAgrees: Query {
        static let name = "usageWindowAgrees"
        var period: String
        func bind(_ p: inout QueryParameters) { p.add(period) }

        struct Row: QueryRow {
            static let columns = ["agrees"]
            var agrees: Bool
            init?(_ row: RowReader) { agrees = row.bool("agrees") ?? false }
        }
    }

    struct AnalyzeUsageTotals: Query {
        static let name = "analyzeUsageTotals"
    }

    struct SlideUsageWindow: Query {
        static let name = "slideUsageWindow"
        var period: String
        func bind(_ p: inout QueryParameters) { p.add(period) }

        struct Row: QueryRow {
            static let columns = ["hours", "totals"]
            var hours: Int
            var totals: Int
            init?(_ row: RowReader) {
                hours = row.int("hours") ?? 0
                totals = row.int("totals") ?? 0
            }
        }
    }

    /// `usageReport` from a window's totals (by fair key, not hourly, every key): no rows when
    /// no window counts from the request's hour.
    struct UsageTotalsReport: Query {
        typealias Row = UsageReport.Row
        static let name = "usageTotalsReport"
        var request: UsageRequest

        func bind(_ p: inout QueryParameters) {
            p.add(request.since)
            p.add(request.queue)
            p.add(request.sort.rawValue)
            p.add(request.limit)
            p.add(request.offset)
        }
    }

    struct UsageReport: Query {
        static let name = "usageReport"
        var request: UsageRequest

        func bind(_ p: inout QueryParameters) {
            p.add(request.since)
            p.add(request.byFairKey)
            p.add(request.hourly)
            p.add(request.queue)
            p.add(request.fairKey)
            p.add(request.sort.rawValue)
            p.add(request.limit)
            p.add(request.offset)
        }

        struct Row: QueryRow {
            static let columns = [
                "kind", "queue", "fair_key", "hour", "rows", "succeeded", "failed", "cancelled", "retried", "decode_cpu_ms", "process_cpu_ms",
                "encode_cpu_ms", "store_cpu_ms", "bytes_fetched", "bytes_stored", "store_hits",
            ]
            /// A row of the page, or the sums of all (`kind`: `row`, `total`).
            enum Kind { case row, total }
            var kind: Kind
            /// How many rows the sums cover (1 for a row of the page).
            var count: Int64
            var usage: Usage

            init?(_ row: RowReader) {
                guard let queue = row.text("queue") else { return nil }
                kind =
                    switch row.text("kind") {
                    case "total": .total
                    default: .row
                    }
                count = row.int64("rows") ?? 0
                var u = Usage(queue: kind == .row ? queue : "\(kind)", fairKey: row.text("fair_key") ?? "", hour: row.text("hour"))
                u.succeeded = row.int64("succeeded") ?? 0
                u.failed = row.int64("failed") ?? 0
                u.cancelled = row.int64("cancelled") ?? 0
                u.retried = row.int64("retried") ?? 0
                u.decodeCPUms = row.double("decode_cpu_ms") ?? 0
                u.processCPUms = row.double("process_cpu_ms") ?? 0
                u.encodeCPUms = row.double("encode_cpu_ms") ?? 0
                u.storeCPUms = row.double("store_cpu_ms") ?? 0
                u.bytesFetched = row.int64("bytes_fetched") ?? 0
                u.bytesStored = row.int64("bytes_stored") ?? 0
                u.storeHits = row.int64("store_hits") ?? 0
                usage = u
            }
        }
    }
}
