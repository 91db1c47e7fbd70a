import Foundation
import HalcyonDashboard
import HalcyonQueue
import HalcyonTestSupport
import Logging
import Testing

/// Rows anyone with write access to the tables can make: numbers far out of any range where the
/// pages expect counts and milliseconds. The dashboard renders them; it does not trap.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct HostileRowTests {
    @Test func hugeNumbersInARowRenderEverywhere() async throws {
        let db = try await TestDatabase.create()
        let id = try await HostileRows.insert(db)
        var configuration = DashboardConfiguration()
        configuration.port = 0
        configuration.storeRoot = try TestEnvironment.temporaryDirectory("hostile-rows-store")
        var logger = Logger(label: "dashboard-test")
        logger.logLevel = .critical
        let server = try await DashboardServer.start(configuration: configuration, conninfo: db.conninfo, logger: logger)
        defer { server.stop() }
        for target in ["/jobs/\(id)", "/api/jobs/\(id)", "/", "/jobs", "/jobs?state=failed", "/api/overview"] {
            let page = try await HTTP.get(server, target)
            #expect(page.status == 200, "\(target): \(page.status) \(page.text.prefix(300))")
        }
        let job = try await HTTP.get(server, "/jobs/\(id)").text
        #expect(job.contains("fetch.timeout"), "the error entry is shown")
    }
}

/// A failed job whose error entry and timings hold 1e300 and -1e300, and a sweep record with a
/// size limit of 0.
enum HostileRows {
    static func insert(_ db: TestDatabase) async throws -> Int64 {
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
}
