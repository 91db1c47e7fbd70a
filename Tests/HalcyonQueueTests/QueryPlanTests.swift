import Foundation
import HalcyonCore
import HalcyonTestSupport
import Testing

@testable import HalcyonQueue

/// The claim and rescue statements must stay on their partial indexes as the table grows:
/// EXPLAINed (not run) against 120,000 rows, almost all finished, in several queues, after ANALYZE.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct QueryPlanTests {
    @Test func claimAndRescueUseTheirIndexesOnALargeTable() async throws {
        let db = try await TestDatabase.create()
        try await db.query(
            """
            INSERT INTO halcyon.jobs (source, state, attempt, finished_at, started_at, locked_by, locked_until, queue)
            SELECT 'https://example.com/' || g || '.jpg',
                   (CASE WHEN g % 1000 = 0 THEN 'queued' WHEN g % 1000 = 1 THEN 'running' ELSE 'succeeded' END)::halcyon.job_state,
                   1,
                   CASE WHEN g % 1000 > 1 THEN now() - g * interval '1 ms' END,
                   now(),
                   CASE WHEN g % 1000 = 1 THEN 'w' END,
                   CASE WHEN g % 1000 = 1 THEN now() + interval '1 minute' END,
                   (ARRAY['default', 'thumbnails', 'backfill'])[g % 3 + 1]
            FROM generate_series(1, 120000) AS g
            """)
        try await db.query("INSERT INTO halcyon.queues (name) SELECT 'q' || g FROM generate_series(1, 20) AS g")
        try await db.query("ANALYZE halcyon.jobs")
        try await db.query("ANALYZE halcyon.queues")
        // Every queue, and named queues with limits: each queue one scan of jobs_claim_idx.
        for (queues, slots) in [("{}", "{}"), ("{default,thumbnails}", "{NULL,2}")] {
            let claim = try await plan(db, SQL.claim, ["w", "10", "30", "67108864", queues, slots, "true"])
            #expect(claim.contains("jobs_claim_idx"), "claim plan:\n\(claim)")
            #expect(!claim.contains("Seq Scan on jobs"), "claim plan:\n\(claim)")
        }
        let rescue = try await plan(db, SQL.rescue, ["100", "{}"])
        #expect(rescue.contains("jobs_lease_idx"), "rescue plan:\n\(rescue)")
        #expect(!rescue.contains("Seq Scan"), "rescue plan:\n\(rescue)")

        // The dashboard's overview: every statement on an index, none scanning the succeeded rows.
        try await db.query(
            """
            UPDATE halcyon.jobs SET state = (CASE WHEN id % 2 = 0 THEN 'failed' ELSE 'cancelled' END)::halcyon.job_state,
                   errors = '[{"code":"fetch.http_status","message":"404"}]'
            WHERE id % 1000 = 500
            """)
        try await db.query("ANALYZE halcyon.jobs")
        for (name, sql, params) in [
            ("counts", SQL.overviewCounts, ["100001"]), ("failures", SQL.failuresByCode, ["100000"]),
            ("throughput", SQL.throughputByMinute, ["200000"]),
        ] {
            let p = try await plan(db, sql, params)
            #expect(!p.contains("Seq Scan on jobs"), "\(name) plan:\n\(p)")
        }
        let counts = try await plan(db, SQL.overviewCounts, ["100001"])
        #expect(counts.contains("jobs_unsuccessful_idx") && counts.contains("jobs_claim_idx"), "counts plan:\n\(counts)")
        // The list's state filter is written in as literals, so a failed-only page reads failed rows.
        let failed = JobQueue.JobFilter(states: [.failed])
        let list = try await plan(db, failed.bind(SQL.countFilteredCapped), failed.parameters + ["10001"])
        #expect(list.contains("jobs_unsuccessful_idx"), "failed-jobs count plan:\n\(list)")
    }

    /// The text plan of `sql` with its parameters bound (generic plans see them as unknowns, so
    /// the custom plan a real call gets is what is shown).
    private func plan(_ db: TestDatabase, _ sql: String, _ params: [String?]) async throws -> String {
        try await db.query("EXPLAIN " + sql, params).rows.compactMap { $0[0] }.joined(separator: "\n")
    }
}
