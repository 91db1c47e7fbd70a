import Foundation
import HalcyonBench
import HalcyonCore
import HalcyonTestSupport
import Testing

@testable import HalcyonQueue

/// Every statement a worker runs on its hot path, and the dashboard overview's, planned on a
/// table as hours of work leave it (`Backlog`: 200,000 rows, scattered by retention and churn,
/// analyzed) on PostgreSQL's default planner settings: none may scan `halcyon.jobs`
/// sequentially, and none may be estimated past `jit_above_cost` (100,000 by default) — an
/// estimate that grows with the table is a plan that depends on luck with statistics, and
/// on a server without Halcyon's `jit = off` (a pooler's other clients, a DBA's copy of the
/// statement) it would be compiled for hundreds of milliseconds. (Not here: the progress line's
/// exact counts, which read the table by design and are throttled by their own cost instead.)
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct QueryPlanTests {
    /// PostgreSQL's default `jit_above_cost`.
    static let jitThreshold = 100_000.0
    /// Statements whose every read is LIMITed to a cap and ordered by its partial index: the
    /// planner scans the table instead only when reading all of it (its current size, which the
    /// planner always knows) costs less than the cap's index entries — when most of a small
    /// table is in the counted state. (The overview counts up to 100,000 rows of each state.)
    static let boundedByTheirLimit: Set<String> = ["overview counts"]

    @Test func hotStatementsStayOnIndexesAndUnderTheJITThresholdOnAChurnedTable() async throws {
        let db = try await TestDatabase.create()
        let c = try await db.connect()
        defer { Task { await c.close() } }
        let backlog = Backlog(
            queued: 150_000, history: 150_000, sources: (1...40).map { "https://img.example/\($0).jpg" },
            failingSource: "https://gone.example/x.jpg")
        try await backlog.fill(c)
        // Some claims held by a worker (leases running, and some lapsed), as the rescue sees them.
        try await c.execute(
            """
            UPDATE halcyon.jobs SET state = 'running', locked_by = 'w', attempt = attempt + 1, started_at = now(),
                   locked_until = now() + CASE WHEN id % 2 = 0 THEN interval '30 seconds' ELSE interval '-1 minute' END
            WHERE id IN (SELECT id FROM halcyon.jobs WHERE state = 'queued' AND run_at <= now() ORDER BY id DESC LIMIT 300)
            """)
        try await c.execute("ANALYZE halcyon.jobs")
        let held = try await c.execute(
            "SELECT id, attempt, \(SQL.claimStamp("started_at")) FROM halcyon.jobs WHERE state = 'running' ORDER BY id LIMIT 6"
        ).rows
        let ids = "{" + held.map { $0[0] ?? "" }.joined(separator: ",") + "}"
        let attempts = "{" + held.map { $0[1] ?? "" }.joined(separator: ",") + "}"
        let stamps = "{" + held.map { "\"\($0[2] ?? "")\"" }.joined(separator: ",") + "}"
        let one = held[0][0], oneAttempt = held[0][1], oneStamp = held[0][2]
        let results = JSONValue.array(
            held.map { row in
                [
                    "id": .number(Double(row[0]!)!), "attempt": .number(Double(row[1]!)!), "result_key": "k", "result_digest": "d",
                    "result_path": "p", "result_bytes": 1, "result_width": 1, "result_height": 1, "result_format": "jpeg",
                    "cache_hit": false, "timings": [:], "claimed_at": .string(row[2]!),
                ]
            }
        ).jsonText
        let entry = #"{"code": "fetch.timeout", "message": "timed out"}"#

        let statements: [(name: String, sql: String, params: [String?])] = [
            ("claim", SQL.claim, ["w", "6", "30", "67108864", "{}", "{}", "true"]),
            ("claim, named queues with limits", SQL.claim, ["w", "6", "30", "67108864", "{default,thumbnails}", "{NULL,2}", "true"]),
            ("claim, store hits (250, no siblings)", SQL.claim, ["w", "250", "30", "67108864", "{}", "{}", "false"]),
            ("heartbeat", SQL.heartbeatJobs, [ids, attempts, "w", "30"]),
            ("complete (group commit)", SQL.complete, ["w", results]),
            ("fail / retry", SQL.fail, [one, "w", entry, "fetch.timeout: timed out", "false", "2", "{}", oneAttempt, oneStamp]),
            ("outcome rejected", SQL.failRejected, [one, oneAttempt, "w", entry, "x", oneStamp]),
            ("outcome rejected, noted", SQL.markOutcomeRejected, [one, oneAttempt, "w", entry, "x", oneStamp]),
            ("release", SQL.release, [ids, attempts, "w", stamps]),
            ("rescue", SQL.rescue, ["1000", "{}"]),
            ("expired leases", SQL.expiredLeases, ["1000", "{}"]),
            ("rescue one", SQL.rescueOne, [one]),
            ("drain check", SQL.drainCheck, ["{}"]),
            ("webhook take", SQL.takeCallbacks, ["4", "30"]),
            ("webhook record", SQL.recordCallback, [one, "1", "delivered", nil, "0"]),
            ("worker heartbeat", SQL.heartbeatWorker, ["w", "10", "0"]),
            ("job states (wait)", SQL.jobStates, [ids]),
            ("retention", SQL.pruneBatch, ["{succeeded}", "86400", "1000"]),
            ("overview counts", SQL.overviewCounts, ["100001"]),
            ("overview failures", SQL.failuresByCode, ["100000"]),
            ("overview throughput", SQL.throughputByMinute, ["200000"]),
            ("overview queues", SQL.queueList, ["200"]),
        ]
        var report: [String] = []
        for s in statements {
            let plan = try await c.execute("EXPLAIN (FORMAT JSON) " + s.sql, s.params).rows[0][0] ?? ""
            let text = try await c.execute("EXPLAIN " + s.sql, s.params).rows.compactMap { $0[0] }.joined(separator: "\n")
            let cost = Self.totalCost(ofJSONPlan: plan)
            report.append(s.name.padding(toLength: 40, withPad: " ", startingAt: 0) + String(format: "%10.0f", cost ?? -1))
            #expect(cost != nil, "\(s.name): no cost in\n\(plan)")
            #expect((cost ?? .infinity) < Self.jitThreshold, "\(s.name): estimated at \(cost ?? -1)\n\(text)")
            #expect(!text.contains("Seq Scan on jobs") || Self.boundedByTheirLimit.contains(s.name), "\(s.name) scans the table:\n\(text)")
        }
        print(
            "estimated costs on a churned table of \(try await c.execute("SELECT count(*) AS n FROM halcyon.jobs").value(0, "n") ?? "?") rows:\n"
                + report.joined(separator: "\n"))

        // The claim still reads each queue's index, and the overview its partial indexes.
        let claim = try await plan(c, SQL.claim, ["w", "6", "30", "67108864", "{}", "{}", "true"])
        #expect(claim.contains("jobs_claim_idx"), "claim plan:\n\(claim)")
        let rescue = try await plan(c, SQL.rescue, ["100", "{}"])
        #expect(rescue.contains("jobs_lease_idx"), "rescue plan:\n\(rescue)")
        let counts = try await plan(c, SQL.overviewCounts, ["100001"])
        #expect(counts.contains("jobs_unsuccessful_idx") && counts.contains("jobs_lease_idx"), "counts plan:\n\(counts)")
        // The list's state filter is written in as literals, so a failed-only page reads failed rows.
        let failed = JobQueue.JobFilter(states: [.failed])
        let list = try await plan(c, failed.bind(SQL.countFilteredCapped), failed.parameters + ["10001"])
        #expect(list.contains("jobs_unsuccessful_idx"), "failed-jobs count plan:\n\(list)")
    }

    /// A bulk retry over 30,000 failed rows with unique keys finds the newest failed row of each
    /// key by the index on (unique_key, id), not by reading every failed row for each row (which
    /// made it quadratic: a 1,000-row batch took seconds).
    @Test func bulkRetryLooksUpUniqueKeysByIndex() async throws {
        let db = try await TestDatabase.create()
        let c = try await db.connect()
        defer { Task { await c.close() } }
        try await c.execute(
            """
            INSERT INTO halcyon.jobs (source, unique_key, state, attempt, finished_at, errors, last_error)
            SELECT 'https://e.com/' || g, 'k' || g, 'failed', 1, now(), '[{"code": "fetch.timeout", "message": "x"}]', 'fetch.timeout: x'
            FROM generate_series(1, 30000) g
            """)
        try await c.execute("ANALYZE halcyon.jobs")
        let failed = JobQueue.JobFilter(states: [.failed])
        let retry = try await plan(c, failed.bind(SQL.retryFiltered), failed.parameters + ["1000", "infinity"])
        #expect(retry.contains("jobs_unique_key_unsuccessful_idx") && !retry.contains("Seq Scan on jobs k"), "bulk retry plan:\n\(retry)")
    }

    /// The text plan of `sql` with its parameters bound (generic plans see them as unknowns, so
    /// the custom plan a real call gets is what is shown).
    private func plan(_ c: PGConnection, _ sql: String, _ params: [String?]) async throws -> String {
        try await c.execute("EXPLAIN " + sql, params).rows.compactMap { $0[0] }.joined(separator: "\n")
    }

    /// The top node's "Total Cost" in an `EXPLAIN (FORMAT JSON)` document.
    static func totalCost(ofJSONPlan text: String) -> Double? {
        guard case .array(let docs)? = JSONValue.parse(text), case .object(let doc)? = docs.first, case .object(let plan)? = doc["Plan"]
        else { return nil }
        return plan["Total Cost"]?.numberValue
    }
}
