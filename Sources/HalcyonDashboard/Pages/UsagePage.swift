import Foundation
import HalcyonQueue
import HalcyonRuntime

/// `/usage` (template `usagepage`): what each queue and fair key cost over the last 24 hours and
/// the last 7 days — jobs, CPU by stage, bytes fetched and stored, store hits (`halcyon usage`
/// prints the same, `halcyon.usage` keeps it by the hour).
struct UsagePage {
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
    struct Window {
        let title: String
        let since: String
        let rows: [Row]
        let total: Row
        let empty: Bool
    }

    /// The periods shown, with their names in the API.
    static let windows: [(key: String, title: String, seconds: Double)] = [
        ("last_24h", "Last 24 hours", 86_400), ("last_7d", "Last 7 days", 7 * 86_400),
    ]

    let asOf: String
    let windows: [Window]

    init(_ reports: [(since: Date, rows: [Usage])], now: Date) {
        asOf = Format.utc(now)
        windows = zip(Self.windows, reports).map { w, r in
            Window(
                title: w.title, since: Format.utc(r.since), rows: r.rows.map { Self.row($0) },
                total: Self.row(Usage.total(r.rows), total: true), empty: r.rows.isEmpty)
        }
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

    /// The API's body: each period's rows (by queue and fair key) and total, as `halcyon usage --json`.
    static func json(_ reports: [(since: Date, rows: [Usage])]) -> JSONValue {
        var o: [String: JSONValue] = [:]
        for (w, r) in zip(windows, reports) {
            o[w.key] = .object([
                "since": .string(ISO8601.format(r.since)), "rows": .array(r.rows.map { $0.json(byFairKey: true, hourly: false) }),
                "total": Usage.total(r.rows).json(byFairKey: false, hourly: false),
            ])
        }
        return .object(o)
    }

    func render() -> String { Views.render("usagepage", self) }
}
