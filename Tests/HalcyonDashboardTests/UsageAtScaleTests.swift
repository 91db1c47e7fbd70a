import Foundation
import HalcyonDashboard
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// A fair key per user, as the docs suggest: 300,000 keys with usage in the last day (and 50,000
/// attempts not rolled up yet). Every usage page and API answers with one page of rows, the sums
/// of the rest and of all, in bytes that do not grow with the keys.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct UsageAtScaleTests {
    @Test func threeHundredThousandKeysAnswerAPageAtATime() async throws {
        let db = try await TestDatabase.create()
        try await db.query(
            """
            INSERT INTO halcyon.usage (queue, fair_key, hour, succeeded, failed, decode_cpu_ms, process_cpu_ms, encode_cpu_ms, store_cpu_ms,
                                       bytes_fetched, bytes_stored)
            SELECT 'q' || (k % 3), 'user-' || k, date_trunc('hour', now()) - (k % 24) * interval '1 hour', 1, k % 2, k % 1000, 1, 1, 1,
                   1000, 10
            FROM generate_series(1, 300000) k
            """)
        // Attempts not rolled up yet: 50,000 of the same keys (users 2, 4, …, 100,000 of q1 and q2
        // and q0 as their numbers fall) — the page adds them to their hours' rows.
        try await db.query(
            """
            INSERT INTO halcyon.usage_events (queue, fair_key, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms,
                                              encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits)
            SELECT 'q' || (2 * k % 3), 'user-' || 2 * k, 1, 0, 0, 0, 0, 0, 0, 0, 1000, 10, 0
            FROM generate_series(1, 50000) k
            """)
        try await db.query("ANALYZE halcyon.usage")
        let configuration = DashboardConfiguration()
        // What is asserted is what the pages hold, not how fast: summing the hours of 300,000 keys
        // a page 100,000 deep took over the dashboard's 10 s on a loaded suite machine.
        let server = try await DashboardFixture.server(db, store: try TestEnvironment.temporaryDirectory("usage-at-scale-store")) {
            $0.statementTimeout = .seconds(120)
        }
        defer { server.stop() }

        // The API: a page of the default size, largest CPU first, and the sums.
        var took: [String: Duration] = [:]
        func get(_ target: String) async throws -> HTTPResponse {
            let started = ContinuousClock.now
            let reply = try await HTTP.get(server, target)
            took[target] = ContinuousClock.now - started
            #expect(reply.status == 200, "\(target): \(reply.status) \(reply.text.prefix(300))")
            #expect(reply.text.utf8.count < 64 * 1024, "\(target): \(reply.text.utf8.count) bytes")
            return reply
        }
        let api = try #require(JSONValue.parse(try await get("/api/usage").text))
        let rows = try #require(api["rows"]?.arrayValue)
        #expect(rows.count == configuration.pageSize && api["total_rows"]?.numberValue == 300_000 && api["more"]?.boolValue == true)
        #expect(api["next_offset"]?.numberValue == Double(configuration.pageSize))
        // The largest CPU: keys 999, 1999, … (k % 1000 = 999), 3 ms more each than decode alone.
        #expect(rows.first?["cpu_ms"]?["total"]?.numberValue == 1002, "\(rows.first ?? .null)")
        #expect(rows.allSatisfy { $0["cpu_ms"]?["total"]?.numberValue == 1002 })
        #expect(api["total"]?["succeeded"]?.numberValue == 350_000 && api["total"]?["bytes_fetched"]?.numberValue == 350_000_000)
        #expect(api["others"]?["rows"]?.numberValue == Double(300_000 - configuration.pageSize))
        #expect(
            (api["others"]?["succeeded"]?.numberValue ?? 0) + rows.reduce(0) { $0 + ($1["succeeded"]?.numberValue ?? 0) } == 350_000,
            "the page and the others make the total")

        // Sorted by key, a later page; one key found by name, its events added to its hour.
        let byKey = try #require(JSONValue.parse(try await get("/api/usage?sort=key&offset=100000&period=7d").text))
        #expect(byKey["rows"]?.arrayValue?.first?["queue"]?.stringValue == "q1", "\(byKey["rows"]?.arrayValue?.first ?? .null)")
        #expect(byKey["offset"]?.numberValue == 100_000 && byKey["more"]?.boolValue == true)
        let one = try #require(JSONValue.parse(try await get("/api/usage?fair_key=user-4").text))
        #expect(one["total_rows"]?.numberValue == 1 && one["rows"]?.arrayValue?.first?["succeeded"]?.numberValue == 2, "\(one)")

        // The page: the same rows, a pager, the others' line.
        let page = try await get("/usage").text
        #expect(page.contains("rows 1–\(configuration.pageSize) of 300,000"), "\(page.prefix(3000))")
        #expect(page.contains("299,950 rows not shown") && page.contains("next »"))
        let later = try await get("/usage?sort=succeeded&offset=50").text
        #expect(later.contains("rows 51–100 of 300,000") && later.contains("« previous"))
        for (target, t) in took.sorted(by: { $0.key < $1.key }) { print("usage at 300,000 keys, from the hours: \(target) in \(t)") }

        // With the 24-hour window built (the roll-up's upkeep; 7 days is past this retention), the
        // same answers from its totals, byte for byte, events pending and all.
        let targets = ["/api/usage", "/api/usage?sort=succeeded&offset=50", "/api/usage?sort=key&offset=100000", "/api/usage?queue=q1"]
        var fromHours: [String: String] = [:]
        for target in targets { fromHours[target] = try await get(target).text }
        let queue = JobQueue(connection: try await db.connect())
        let upkeep = try await queue.keepUsageWindows(retain: .days(2))
        #expect(upkeep.steps.map(\.action) == [.build, .none] && upkeep.steps.first?.totals == 300_000, "\(upkeep)")
        let since = JobQueue.usageHour(Date().addingTimeInterval(-86_400))
        let report = try await queue.usage(UsageRequest(since: since, byFairKey: true, sort: .cpu, limit: 50))
        if report.request.since == JobQueue.usageHour(Date().addingTimeInterval(-86_400)) {
            #expect(report.fromTotals, "the hour turned while the window was built")
        }
        took = [:]
        for target in targets { #expect(try await get(target).text == fromHours[target], "\(target)") }
        for (target, t) in took.sorted(by: { $0.key < $1.key }) { print("usage at 300,000 keys, from the totals: \(target) in \(t)") }
    }
}
