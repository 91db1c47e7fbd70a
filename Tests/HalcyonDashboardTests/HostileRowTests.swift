import Foundation
import HalcyonDashboard
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// Rows anyone with write access to the tables can make: numbers far out of any range where the
/// pages expect counts and milliseconds. The dashboard renders them; it does not trap.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct HostileRowTests {
    @Test func hugeNumbersInARowRenderEverywhere() async throws {
        let db = try await TestDatabase.create()
        let id = try await HostileRows.insert(db)
        let measured = try await HostileRows.insertMeasured(db)
        let server = try await DashboardFixture.server(db, store: try TestEnvironment.temporaryDirectory("hostile-rows-store"))
        defer { server.stop() }
        for target in [
            "/jobs/\(id)", "/api/jobs/\(id)", "/jobs/\(measured)", "/api/jobs/\(measured)", "/", "/jobs", "/jobs?state=failed", "/api/overview",
            "/usage", "/api/usage",
        ] {
            let page = try await HTTP.get(server, target)
            #expect(page.status == 200, "\(target): \(page.status) \(page.text.prefix(300))")
        }
        let usage = try await HTTP.get(server, "/usage").text
        #expect(usage.contains("&lt;b&gt;tenant&lt;/b&gt;") && !usage.contains("<b>tenant"), "a fair key is text")
        let job = try await HTTP.get(server, "/jobs/\(id)").text
        #expect(job.contains("fetch.timeout"), "the error entry is shown")
        // A score of NaN and a quality of 32767 are unknowns, held out of the page and the API.
        let page = try await HTTP.get(server, "/jobs/\(measured)").text
        #expect(page.contains("score</dt><dd>100.00") && !page.contains("32767"), "\(page)")
        let api = JSONValue.parse(try await HTTP.get(server, "/api/jobs/\(measured)").text)
        #expect(api?["result_quality"] == .null && api?["result_score"] == .number(100))
        let nan = try await HostileRows.insertMeasured(db, score: "'NaN'")
        #expect(JSONValue.parse(try await HTTP.get(server, "/api/jobs/\(nan)").text)?["result_score"] == .null)
        #expect(!(try await HTTP.get(server, "/jobs/\(nan)").text.contains("score</dt><dd>n")))
    }
}

/// A failed job whose error entry and timings hold 1e300 and -1e300, and a sweep record with a
/// size limit of 0.
enum HostileRows {
    static func insert(_ db: TestDatabase) async throws -> Int64 {
        // Usage at the ends of its columns' ranges, under a key that is markup.
        try await db.query(
            """
            INSERT INTO halcyon.usage (queue, fair_key, hour, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms,
                                       encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits)
            VALUES ('default', '<b>tenant</b>', date_trunc('hour', now()), 9223372036854775807, 9223372036854775807, 9223372036854775807,
                    -9223372036854775808, 1e300, -1e300, 'NaN', 'Infinity', 9223372036854775807, -1, 9223372036854775807)
            """)
        let r = try await db.query(
            """
            INSERT INTO halcyon.jobs (source, state, attempt, finished_at, last_error, errors, timings)
            VALUES ('https://example.com/huge.jpg', 'failed', 1, now(), 'fetch.timeout: slow',
                    '[{"at": "2026-11-25T00:00:00Z", "attempt": 1e300, "code": "fetch.timeout", "message": "slow",
                       "sources": [{"source": "https://example.com/huge.jpg", "code": "fetch.timeout", "message": "slow",
                                    "attempts": -1e300, "permanent": false}]}]',
                    '{"total_ms": 1e300, "fetch_ms": 1e300, "decode_ms": -1e300, "queue_wait_ms": 1e-300}')
            RETURNING id
            """)
        try await db.query(
            """
            INSERT INTO halcyon.store_sweeps (swept_by, store_root, kept_files, kept_bytes, size_limit, removed_files, removed_keys, freed_bytes, seconds)
            VALUES ('someone', '/nowhere', 1, 9223372036854775807, 0, 0, 0, 0, 1e300)
            """)
        return Int64(r.value(0, "id") ?? "") ?? -1
    }

    /// A succeeded job whose `result_quality` and `result_score` are out of range (its table's
    /// constraints dropped): 32767 and, by default, 1e30.
    static func insertMeasured(_ db: TestDatabase, score: String = "1e30") async throws -> Int64 {
        try await db.query(
            """
            ALTER TABLE halcyon.jobs DROP CONSTRAINT IF EXISTS jobs_result_quality_range, DROP CONSTRAINT IF EXISTS jobs_result_score_range
            """)
        let digest = String(repeating: "ab", count: 32)
        let r = try await db.query(
            """
            INSERT INTO halcyon.jobs (source, state, attempt, finished_at, result_digest, result_path, result_format, result_quality, result_score)
            VALUES ('https://example.com/measured.jpg', 'succeeded', 1, now(), '\(digest)', 'objects/ab/ab/\(digest).jpg', 'jpeg', 32767, \(score))
            RETURNING id
            """)
        return Int64(r.value(0, "id") ?? "") ?? -1
    }
}
