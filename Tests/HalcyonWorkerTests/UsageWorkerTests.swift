import Foundation
import HalcyonQueue
import HalcyonRuntime
import HalcyonSamples
import HalcyonTestSupport
import Testing

/// `halcyon usage` after a mixed run of real workers agrees with the jobs' own rows: jobs counted
/// exactly, CPU by stage as their timings say, bytes exact — before and after the roll-up. (The
/// roll-up itself and which updates append events: `UsageTests`.)
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct UsageWorkerTests {
    static let tiny: Data = try! SampleImages.photo(width: 32, height: 24, seed: 5)
    static let chain = "resize(16x16) |> format(png)"

    func usage(_ db: TestDatabase, _ arguments: [String]) async throws -> JSONValue {
        let p = try HalcyonProcess(["usage", "--json"] + arguments, conninfo: db.conninfo)
        #expect(await p.wait(timeout: 60) == 0, "\(p.output)")
        let text = p.output
        let json = text.firstIndex(of: "{").flatMap { JSONValue.parse(String(text[$0...])) }
        return try #require(json, "\(text)")
    }

    func drained(_ db: TestDatabase) async throws -> Bool {
        try await waitUntil(120) {
            try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE state IN ('queued', 'running')").value(0, "n") == "0"
        }
    }

    /// What the jobs' rows say of fair key `key` ('' for the common share).
    struct Expected {
        var succeeded = 0, failed = 0, hits = 0
        var cpu: [String: Double] = [:]
        var fetched: Int64 = 0, stored: Int64 = 0
    }

    func expected(_ db: TestDatabase) async throws -> [String: Expected] {
        let rows = try await db.query(
            """
            SELECT coalesce(fair_key, '') AS k, count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
                   count(*) FILTER (WHERE state = 'failed') AS failed, count(*) FILTER (WHERE cache_hit) AS hits,
                   coalesce(sum((timings->>'decode_cpu_ms')::float8), 0) AS decode, coalesce(sum((timings->>'process_cpu_ms')::float8), 0) AS process,
                   coalesce(sum((timings->>'encode_cpu_ms')::float8), 0) AS encode, coalesce(sum((timings->>'store_cpu_ms')::float8), 0) AS store,
                   coalesce(sum(source_bytes) FILTER (WHERE state = 'succeeded' AND NOT cache_hit), 0) AS fetched,
                   coalesce(sum(result_bytes) FILTER (WHERE state = 'succeeded' AND NOT cache_hit), 0) AS stored
            FROM halcyon.jobs GROUP BY 1
            """)
        var out: [String: Expected] = [:]
        for i in rows.rows.indices {
            func n(_ c: String) -> Double { Double(rows.value(i, c) ?? "") ?? -1 }
            out[rows.value(i, "k") ?? "?"] = Expected(
                succeeded: Int(n("succeeded")), failed: Int(n("failed")), hits: Int(n("hits")),
                cpu: ["decode": n("decode"), "process": n("process"), "encode": n("encode"), "store": n("store")],
                fetched: Int64(n("fetched")), stored: Int64(n("stored")))
        }
        return out
    }

    func check(_ report: JSONValue, against expected: [String: Expected], retriedKey: String) {
        let rows = report["rows"]?.arrayValue ?? []
        #expect(rows.count == expected.count, "\(report.jsonText)")
        for row in rows {
            let key = row["fair_key"]?.stringValue ?? ""
            guard let e = expected[key] else {
                Issue.record("a row for an unknown key: \(row.jsonText)")
                continue
            }
            func n(_ name: String) -> Double { row[name]?.numberValue ?? -1 }
            #expect(Int(n("succeeded")) == e.succeeded && Int(n("failed")) == e.failed && Int(n("store_hits")) == e.hits, "\(key): \(row.jsonText)")
            #expect(Int(n("retried")) == (key == retriedKey ? 1 : 0), "\(key): \(row.jsonText)")
            #expect(Int64(n("bytes_fetched")) == e.fetched && Int64(n("bytes_stored")) == e.stored, "\(key): \(row.jsonText)")
            for (stage, want) in e.cpu {
                let got = row["cpu_ms"]?[stage]?.numberValue ?? -1
                // Within 5 % (and the JSON's 0.1 ms rounding).
                #expect(abs(got - want) <= max(0.05 * want, 0.11), "\(key) \(stage): usage \(got) ms, the jobs' timings \(want) ms")
            }
        }
    }

    /// Two fair keys and the common share: successes, a permanent failure (404), a transient one
    /// (503 once) then a success, then store hits of results already made.
    @Test func usageAgreesWithTheJobsOwnRows() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("usage")
        let name = "usage-\(db.name).jpg"
        let url = try Origin.publish(name, Self.tiny)
        var values: [String] = []
        for (i, key) in ["a", "a", "a", "b", "b", nil, nil].enumerated() {
            values.append("('\(url)?j=\(i)', '\(Self.chain)', \(key.map { "'\($0)'" } ?? "NULL"), '{}', 5)")
        }
        values.append("('\(TestEnvironment.origin)/status/404?u=\(db.name)', '\(Self.chain)', 'b', '{}', 1)")
        values.append(
            "('\(TestEnvironment.origin)/fail/1/503/usage-\(db.name)/\(name)', '\(Self.chain)', 'a', '{\"retry\": {\"max\": 0}}', 5)")
        try await db.query(
            "INSERT INTO halcyon.jobs (source, processors, fair_key, options, max_attempts) VALUES \(values.joined(separator: ", "))")
        let w = try TestWorker(
            ["work", "--store", store.path, "--allow-network", "127.0.0.1/32", "--concurrency", "2", "--retry-base", "100ms"],
            conninfo: db.conninfo)
        try await w.ready()
        #expect(try await drained(db), "\(w.output.suffix(2000))")
        // Store hits: the same sources and chain again, for both keys.
        try await db.query(
            """
            INSERT INTO halcyon.jobs (source, processors, fair_key)
            VALUES ($1 || '?j=0', $2, 'a'), ($1 || '?j=1', $2, 'a'), ($1 || '?j=3', $2, 'b')
            """, [url, Self.chain])
        #expect(try await drained(db), "\(w.output.suffix(2000))")

        let want = try await expected(db)
        #expect(want["a"]?.succeeded == 6 && want["a"]?.hits == 2 && want["b"]?.failed == 1 && want["b"]?.hits == 1, "\(want)")
        let before = try await usage(db, ["--by", "fair-key", "--since", "1h"])
        check(before, against: want, retriedKey: "a")
        let total = before["total"]
        #expect(total?["succeeded"]?.numberValue == 11 && total?["failed"]?.numberValue == 1, "\(before.jsonText)")
        let byQueue = try await usage(db, [])
        #expect(byQueue["rows"]?.arrayValue?.count == 1 && byQueue["total"] == total, "\(byQueue.jsonText)")

        // The worker's own roll-up (its first run comes 5–30 s after start), then this test's of
        // whatever is left: the same report.
        #expect(try await w.waitForOutput("usage rolled up", timeout: 90), "\(w.output.suffix(2000))")
        let q = JobQueue(connection: try await db.connect())
        while try await q.rollUpUsage().events > 0 {}
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.usage_events").value(0, "n") == "0")
        let after = try await usage(db, ["--by", "fair-key", "--since", "1h"])
        #expect(after["rows"] == before["rows"] && after["total"] == total, "\(after.jsonText)\n\(before.jsonText)")
        let hourly = try await usage(db, ["--hourly", "--queue", "default"])
        #expect((hourly["rows"]?.arrayValue ?? []).allSatisfy { $0["hour"]?.stringValue?.hasSuffix(":00:00Z") == true }, "\(hourly.jsonText)")
        #expect(try await usage(db, ["--queue", "elsewhere"])["rows"]?.arrayValue?.isEmpty == true)
        w.signal(SIGTERM)
        #expect(await w.wait(timeout: 60) == 0)
    }
}
