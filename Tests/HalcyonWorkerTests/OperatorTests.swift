import Foundation
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// What an operator runs and reads: the demo, the metrics.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct OperatorTests {
    let helper = WorkerTests()

    @Test func theDemoRunsToCompletionWithTheOutcomesItStaged() async throws {
        let db = try await TestDatabase.create()
        let home = try TestEnvironment.temporaryDirectory("demo-home")
        for run in 1...2 {  // re-runnable: the second run finds the images and the store in place
            let demo = try HalcyonProcess(
                ["demo", "--store", home.appendingPathComponent("store").path], conninfo: db.conninfo,
                environment: ["HALCYON_HOME": home.path])
            #expect(await demo.wait(timeout: 240) == 0, "\(demo.output.suffix(3000))")
            #expect(demo.output.contains("demo: all 13 outcomes as staged"), "\(demo.output.suffix(3000))")
            #expect(
                demo.output.contains(" dashboard --database-url '\(db.conninfo)' --store '\(home.path)/store'   then open http://127.0.0.1:8080/"))
            for line in ["fallback served it", "attempt 2 succeeded", "served from the store, no download", "failed at once, permanently"] {
                #expect(demo.output.contains(line), "run \(run): \(line)")
            }
        }
        let r = try await db.query(
            """
            SELECT count(*) FILTER (WHERE state = 'succeeded') AS ok, count(*) FILTER (WHERE state = 'failed') AS failed,
                   count(*) FILTER (WHERE cache_hit) AS hits, count(*) FILTER (WHERE attempt = 2) AS retried,
                   count(*) FILTER (WHERE result_source <> source) AS fallbacks, count(DISTINCT locked_by) AS lockers
            FROM halcyon.jobs
            """)
        #expect(r.value(0, "ok") == "24" && r.value(0, "failed") == "2")
        #expect(r.value(0, "hits") == "2" && r.value(0, "retried") == "2" && r.value(0, "fallbacks") == "2")
        // Both workers of each run did some of the work.
        let workers = try await db.query("SELECT count(*) AS n FROM halcyon.workers WHERE jobs_done + jobs_failed > 0")
        #expect(Int(workers.value(0, "n") ?? "") ?? 0 >= 2)

        // The dashboard the demo points to (on a free port here) shows the demo's jobs.
        let dashboard = try HalcyonProcess(["dashboard", "--port", "0", "--store", home.appendingPathComponent("store").path], conninfo: db.conninfo)
        defer { dashboard.signal(SIGTERM) }
        #expect(try await waitUntil(120) { dashboard.output.contains("dashboard: http://127.0.0.1:") }, "\(dashboard.output)")
        let url = try #require(dashboard.output.split(separator: "\n").first { $0.hasPrefix("dashboard: ") }?.dropFirst(11))
        let overview = try #require(JSONValue.parse(try Origin.get(url + "api/overview")))
        #expect(overview["counts"]?["succeeded"]?["value"]?.numberValue == 24 && overview["counts"]?["failed"]?["value"]?.numberValue == 2)
        dashboard.signal(SIGTERM)
        #expect(await dashboard.wait(timeout: 30) == 0, "SIGTERM stops the dashboard cleanly: \(dashboard.output)")
    }

    /// Parses Prometheus' text format strictly enough to catch a malformed line: returns
    /// `name{labels}` → value for every sample, and checks TYPE lines come before their samples.
    static func parsePrometheus(_ text: String) throws -> [String: Double] {
        var samples: [String: Double] = [:]
        var typed: Set<String> = []
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                #expect(parts.count == 4 && ["counter", "gauge", "histogram"].contains(String(parts[3])), "\(line)")
                typed.insert(String(parts[2]))
                continue
            }
            if line.hasPrefix("# HELP ") { continue }
            let space = try #require(line.lastIndex(of: " "), "\(line)")
            let series = String(line[..<space])
            let value = try #require(Double(line[line.index(after: space)...]), "\(line)")
            let name = String(series.prefix { $0 != "{" })
            #expect(name.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" }, "\(line)")
            let family = ["_bucket", "_sum", "_count"].reduce(name) { n, suffix in
                typed.contains(n) ? n : (n.hasSuffix(suffix) ? String(n.dropLast(suffix.count)) : n)
            }
            #expect(typed.contains(family), "sample before its TYPE: \(line)")
            if series.contains("{") {
                #expect(series.hasSuffix("}"), "\(line)")
                let labels = series.drop { $0 != "{" }.dropFirst().dropLast()
                for pair in labels.split(separator: ",") {
                    #expect(pair.contains("=\"") && pair.hasSuffix("\""), "\(line)")
                }
            }
            samples[series] = value
        }
        return samples
    }

    @Test func metricsAreValidPrometheusTextAndCountTheWork() async throws {
        _ = try WorkerTests.published()
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let file = store.deletingLastPathComponent().appendingPathComponent("halcyon-\(db.name).prom")
        try await db.query("SELECT halcyon.set_queue_limits('capped', max_running => 2, max_per_second => 4)")
        let w = try await helper.worker(db, store: store, ["--metrics-port", "0", "--metrics-file", file.path])
        // The endpoint's address is in the log.
        var url: String?
        for _ in 0..<100 where url == nil {
            url = w.output.split(whereSeparator: { $0 == " " || $0 == "\n" }).first { $0.hasPrefix("url=http://") }.map { String($0.dropFirst(4)) }
            try await Task.sleep(for: .milliseconds(100))
        }
        let endpoint = try #require(url, "\(w.output)")
        func scrape() throws -> [String: Double] {
            let text = try Origin.get(endpoint)
            return try Self.parsePrometheus(text)
        }
        // The fleet's queue limits, read when the worker starts (then every 15 s).
        _ = try await waitUntil(60) { try scrape()["halcyon_queue_max_running{queue=\"capped\"}"] != nil }
        let before = try scrape()
        #expect(before["halcyon_queue_max_running{queue=\"capped\"}"] == 2)
        #expect(before["halcyon_queue_max_per_second{queue=\"capped\"}"] == 4)
        #expect(before["halcyon_queue_running{queue=\"capped\"}"] == 0)
        #expect(before["halcyon_queue_max_running_per_key{queue=\"capped\"}"] == nil)
        #expect(before["halcyon_queue_running{queue=\"default\"}"] == nil, "a queue without limits is not reported")
        #expect(before["halcyon_jobs_total{outcome=\"succeeded\",code=\"\"}"] == nil)
        #expect(before["halcyon_processing_slots"] != nil && before["halcyon_jobs_in_flight"] == 0)
        #expect(try Origin.get(endpoint.replacingOccurrences(of: "/metrics", with: "/healthz")) == "ok\n")

        let source = "\(TestEnvironment.origin)/files/photo.jpg?t=\(db.name)"
        _ = try await helper.enqueue(
            db,
            [
                helper.job(source, "resize(60x60)"), helper.job(source, "resize(70x70)"),
                helper.job("\(TestEnvironment.origin)/status/404?t=\(db.name)"),
            ])
        #expect(try await waitUntil(120) { try await helper.count(db, "state IN ('succeeded', 'failed')") == 3 })
        _ = try await helper.enqueue(db, [helper.job(source, "resize(60x60)")])  // a store hit
        #expect(try await waitUntil(120) { try await helper.count(db, "state = 'succeeded'") == 3 })

        // The row is written before the worker counts it: give the counter a moment.
        _ = try await waitUntil(120) { try scrape()["halcyon_jobs_total{outcome=\"succeeded\",code=\"\"}"] == 3 }
        let after = try scrape()
        #expect(after["halcyon_jobs_total{outcome=\"succeeded\",code=\"\"}"] == 3)
        #expect(after["halcyon_jobs_total{outcome=\"failed\",code=\"fetch.http_status\"}"] == 1)
        #expect(after["halcyon_cache_hits_total"] == 1)
        #expect(after["halcyon_decodes_total"] == 1)  // two chains of one source: one decode
        #expect((after["halcyon_fetch_bytes_total"] ?? 0) >= Double(WorkerTests.photo.count))
        let count = after["halcyon_stage_duration_seconds_count{stage=\"total\"}"]
        #expect(count == 4)
        #expect(after["halcyon_stage_duration_seconds_bucket{stage=\"total\",le=\"+Inf\"}"] == count)
        #expect(after["halcyon_stage_duration_seconds_count{stage=\"decode\"}"] == 2)
        #expect(after["halcyon_stage_duration_seconds_bucket{stage=\"total\",le=\"60.0\"}"] == count)
        // Every family README documents is there under its documented name (the store gauges
        // appear after this worker's first sweep, which this one does not run).
        let families = Set(after.keys.map { String($0.prefix { $0 != "{" }) })
        for name in [
            "halcyon_jobs_total", "halcyon_cache_hits_total", "halcyon_fetch_bytes_total", "halcyon_store_bytes_written_total",
            "halcyon_decodes_total", "halcyon_rescued_jobs_total", "halcyon_store_sweeps_total", "halcyon_store_swept_bytes_total",
            "halcyon_stage_duration_seconds_bucket", "halcyon_stage_duration_seconds_sum", "halcyon_stage_duration_seconds_count",
            "halcyon_jobs_in_flight", "halcyon_processing_slots", "halcyon_fetch_slots", "halcyon_worker_start_time_seconds",
        ] {
            #expect(families.contains(name), "\(name) missing from /metrics: \(families.sorted())")
        }
        #expect(after["halcyon_jobs_in_flight"] == 0)
        w.signal(SIGTERM)
        #expect(await w.wait(timeout: 30) == 0)
        // The file holds the same families, rewritten at exit.
        let written = try Self.parsePrometheus(try String(contentsOf: file, encoding: .utf8))
        #expect(written["halcyon_jobs_total{outcome=\"succeeded\",code=\"\"}"] == 3)
    }
}
