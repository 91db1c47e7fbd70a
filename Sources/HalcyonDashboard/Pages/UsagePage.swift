import Foundation
import HalcyonQueue
import HalcyonRuntime

/// `/usage` (template `usagepage`): what each queue and fair key cost over the last 24 hours or
/// the last 7 days — jobs, CPU by stage, bytes fetched and stored, store hits — one page of
/// rows at a time, largest first by the chosen measure, then the sum of the rows not shown and
/// the total (`halcyon usage` prints the same, `halcyon.usage` keeps it by the hour). The rows
/// are summed and ordered in the database: a page costs the same memory whatever the number of
/// keys.
struct UsagePage {
    /// What `/usage` and `/api/usage` are asked: `period`, `sort`, `queue`, `fair_key`, `offset`.
    struct Query: Sendable, Equatable {
        enum Period: String, CaseIterable, Sendable {
            case day = "24h", week = "7d"
            var title: String { self == .day ? "Last 24 hours" : "Last 7 days" }
            var seconds: Double { self == .day ? 86_400 : 7 * 86_400 }
        }
        var period = Period.day
        var sort = UsageRequest.Sort.cpu
        var queue: String?
        /// "" asks for the common share.
        var fairKey: String?
        var offset = 0

        /// The longest fair key (as `halcyon.jobs` holds them).
        static let maxFairKeyBytes = 200
        /// The most rows a page skips: paging further is for `halcyon usage --offset`; a key is
        /// found with `fair_key`.
        static let maxOffset = 100_000

        init() {}

        /// Reads the query string; a message for a bad field.
        init(_ fields: [(name: String, value: String)]) throws(DashboardRefusal) {
            func value(_ name: String) -> String? { fields.last(where: { $0.name == name })?.value }
            if let p = value("period"), !p.isEmpty {
                guard let period = Period(rawValue: p) else { throw DashboardRefusal(400, "period must be 24h or 7d") }
                self.period = period
            }
            if let s = value("sort"), !s.isEmpty {
                guard let sort = UsageRequest.Sort(rawValue: s) else {
                    throw DashboardRefusal(400, "sort must be one of \(UsageRequest.Sort.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                self.sort = sort
            }
            if let q = value("queue")?.trimmingCharacters(in: .whitespaces), !q.isEmpty {
                if let problem = QueueName.problem(q) { throw DashboardRefusal(400, "queue: \(problem)") }
                queue = q
            }
            if let k = value("fair_key") {
                guard k.utf8.count <= Self.maxFairKeyBytes else {
                    throw DashboardRefusal(400, "fair_key is over \(Self.maxFairKeyBytes) bytes (no fair key is longer)")
                }
                fairKey = k
            }
            if let o = value("offset"), !o.isEmpty {
                guard let offset = Int(o), (0...Self.maxOffset).contains(offset) else {
                    throw DashboardRefusal(400, "offset must be a whole number from 0 to \(Self.maxOffset)")
                }
                self.offset = offset
            }
        }

        /// The report this asks for, `limit` rows to a page, from the hour `now` minus the period
        /// falls in.
        func request(limit: Int, now: Date) -> UsageRequest {
            UsageRequest(
                since: JobQueue.usageHour(now.addingTimeInterval(-period.seconds)), byFairKey: true, queue: queue, fairKey: fairKey,
                sort: sort, limit: limit, offset: offset)
        }

        /// `/usage` with these fields, changed by `change` (default values left out).
        func link(_ change: (inout Query) -> Void = { _ in }) -> String {
            var q = self
            change(&q)
            return "/usage"
                + Format.query([
                    ("period", q.period == .day ? "" : q.period.rawValue), ("sort", q.sort == .cpu ? "" : q.sort.rawValue),
                    ("queue", q.queue ?? ""), ("fair_key", q.fairKey ?? ""), ("offset", q.offset == 0 ? "" : String(q.offset)),
                ])
        }
    }

    struct Row {
        let queue: String
        let query: String
        let fairKey: String
        let common: Bool
        let succeeded: String
        let failed: String
        let retried: String
        let cpu: String
        let decode: String
        let process: String
        let encode: String
        let store: String
        let fetched: String
        let stored: String
        let hits: String
    }
    struct Choice {
        let name: String
        let link: String
        let current: Bool
    }

    let asOf: String
    let title: String
    let since: String
    let periods: [Choice]
    let sorts: [Choice]
    let queue: String
    let fairKey: String
    let filtered: Bool
    let clear: String
    let rows: [Row]
    let empty: Bool
    /// "rows 51–100 of 300,000", and the sum of the rows not shown.
    let range: String
    let others: Row?
    let otherRows: String
    let total: Row
    let previous: String?
    let next: String?

    init(_ report: UsageReport, query: Query, now: Date) {
        asOf = Format.utc(now)
        title = query.period.title
        since = Format.utc(report.request.since)
        /// A link for each value of `field`, the current one marked; any other starts at row 1.
        func choices<T: RawRepresentable<String> & CaseIterable & Equatable>(_ field: WritableKeyPath<Query, T>) -> [Choice] {
            T.allCases.map { value in
                Choice(
                    name: value.rawValue,
                    link: query.link {
                        $0[keyPath: field] = value; $0.offset = 0
                    }, current: query[keyPath: field] == value)
            }
        }
        periods = choices(\.period)
        sorts = choices(\.sort)
        self.queue = query.queue ?? ""
        fairKey = query.fairKey ?? ""
        filtered = query.queue != nil || query.fairKey != nil
        clear = query.link {
            $0.queue = nil; $0.fairKey = nil; $0.offset = 0
        }
        rows = report.rows.map { Self.row($0) }
        empty = report.totalRows == 0
        let first = report.request.offset + 1, last = report.request.offset + report.rows.count
        range =
            report.rows.isEmpty
            ? "no rows from \(Format.grouped(first)) on; \(Format.grouped(report.totalRows)) in all"
            : "rows \(Format.grouped(first))–\(Format.grouped(last)) of \(Format.grouped(report.totalRows))"
        others = report.otherRows > 0 ? Self.row(report.others, total: true) : nil
        otherRows = Format.grouped(report.otherRows)
        total = Self.row(report.total, total: true)
        let limit = report.request.limit
        previous = query.offset > 0 ? query.link { $0.offset = max(0, query.offset - limit) } : nil
        next = report.nextOffset.flatMap { n in n <= Query.maxOffset ? query.link { $0.offset = n } : nil }
    }

    static func row(_ u: Usage, total: Bool = false) -> Row {
        func ms(_ v: Double) -> String { Format.grouped(Int(saturating: v.rounded())) }
        return Row(
            queue: u.queue, query: Format.percent(u.queue), fairKey: total ? "" : (u.fairKey.isEmpty ? "common share" : u.fairKey),
            common: !total && u.fairKey.isEmpty, succeeded: Format.grouped(u.succeeded), failed: Format.grouped(u.failedOrCancelled),
            retried: Format.grouped(u.retried), cpu: ms(u.cpuMs), decode: ms(u.decodeCPUms), process: ms(u.processCPUms),
            encode: ms(u.encodeCPUms), store: ms(u.storeCPUms), fetched: Format.bytes(u.bytesFetched), stored: Format.bytes(u.bytesStored),
            hits: Format.grouped(u.storeHits))
    }

    /// The API's body: the period asked for, then the page as `UsageReport.json` writes it (each
    /// row as `halcyon usage --json --by fair-key` prints one).
    static func json(_ report: UsageReport, query: Query) -> JSONValue {
        guard case .object(var o) = report.json() else { return .null }
        o["period"] = .string(query.period.rawValue)
        o["since"] = .string(ISO8601.format(report.request.since))
        o["queue"] = query.queue.map { .string($0) } ?? .null
        o["fair_key"] = query.fairKey.map { .string($0) } ?? .null
        return .object(o)
    }

    func render() -> String { Views.render("usagepage", self) }
}
