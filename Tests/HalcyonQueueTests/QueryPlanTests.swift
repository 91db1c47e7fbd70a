import Foundation
import HalcyonBacklog
import HalcyonDomain
import HalcyonRuntime
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
            """
            SELECT id, attempt, to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS stamp
            FROM halcyon.jobs WHERE state = 'running' ORDER BY id LIMIT 6
            """
        ).rows
        let claims = held.map { Claim(id: Int64($0[0]!)!, attempt: Int($0[1]!)!, stamp: $0[2]) }
        let one = claims[0]
        let result = JobResult(key: "k", digest: "d", path: "p", bytes: 1, width: 1, height: 1, format: "jpeg", cacheHit: false, source: nil)
        let error = HalcyonError(.timeout, "timed out", permanent: false)
        let rejection = SQL.Rejection(claim: one, workerID: "w", error: error)
        let callback = JobQueue.Callback(jobID: one.id, attempt: 1, url: "http://127.0.0.1:9/", body: "{}", messageID: "m")
        func claim(_ limit: Int, _ queues: [(name: String, limit: Int?)] = [], siblings: Bool = true) -> SQL.Claim {
            SQL.Claim(workerID: "w", limit: limit, lease: .seconds(30), maxBytes: 67_108_864, queues: queues, siblings: siblings)
        }

        let statements: [(name: String, query: any Query)] = [
            ("claim", claim(6)),
            ("claim, named queues with limits", claim(6, [("default", nil), ("thumbnails", 2)])),
            ("claim, store hits (250, no siblings)", claim(250, siblings: false)),
            ("presets of a claimed batch", SQL.PresetsNamed(names: ["card", "thumb"])),
            ("heartbeat", SQL.HeartbeatJobs(claims: claims, workerID: "w", lease: .seconds(30))),
            ("complete (group commit)", SQL.Complete(workerID: "w", batch: claims.map { ($0, result, StageTimings()) })),
            ("fail / retry", SQL.Fail(claim: one, workerID: "w", error: error, retryDelay: .seconds(2), timings: StageTimings())),
            ("outcome rejected", SQL.FailRejected(rejection: rejection)),
            ("outcome rejected, noted", SQL.MarkOutcomeRejected(rejection: rejection)),
            ("release", SQL.Release(claims: claims, workerID: "w")),
            ("rescue", SQL.Rescue(scan: SQL.ExpiredScan(limit: 1000, excluding: []))),
            ("expired leases", SQL.ExpiredLeases(scan: SQL.ExpiredScan(limit: 1000, excluding: []))),
            ("rescue one", SQL.RescueOne(id: one.id)),
            ("drain check", SQL.DrainCheck(queues: [])),
            ("webhook take", SQL.TakeCallbacks(limit: 4, hold: .seconds(30))),
            ("webhook record", SQL.RecordCallback(callback: callback, outcome: .delivered)),
            ("worker heartbeat", SQL.HeartbeatWorker(id: "w", done: 10, failed: 0)),
            ("job states (wait)", SQL.JobStates(ids: claims.map(\.id))),
            ("retention", SQL.PruneBatch(states: [.succeeded], olderThan: .seconds(86400), limit: 1000)),
            ("overview counts", SQL.OverviewCounts(cap: 100_001)),
            ("overview failures", SQL.FailuresByCode(limit: 100_000)),
            ("overview throughput", SQL.ThroughputByMinute(limit: 200_000)),
            ("overview queues", SQL.QueueList(limit: 200)),
        ]
        var report: [String] = []
        for s in statements {
            let json = try await c.execute("EXPLAIN (FORMAT JSON) " + s.query.text, s.query.parameters.values).rows[0][0] ?? ""
            let text = try await plan(c, s.query)
            let cost = Self.totalCost(ofJSONPlan: json)
            report.append(s.name.padding(toLength: 40, withPad: " ", startingAt: 0) + String(format: "%10.0f", cost ?? -1))
            #expect(cost != nil, "\(s.name): no cost in\n\(json)")
            #expect((cost ?? .infinity) < Self.jitThreshold, "\(s.name): estimated at \(cost ?? -1)\n\(text)")
            #expect(!text.contains("Seq Scan on jobs") || Self.boundedByTheirLimit.contains(s.name), "\(s.name) scans the table:\n\(text)")
        }
        // Workers prepare their statements, and PostgreSQL may settle on a statement's generic
        // plan (planned once, parameters unknown): those hold to the same bounds.
        for s in statements where !Self.unprepared.contains(s.name) {
            let json = try await genericPlan(c, s.query, format: "(FORMAT JSON)")
            let text = try await genericPlan(c, s.query, format: "")
            let cost = Self.totalCost(ofJSONPlan: json)
            report.append((s.name + ", generic").padding(toLength: 40, withPad: " ", startingAt: 0) + String(format: "%10.0f", cost ?? -1))
            #expect(cost != nil, "\(s.name), generic: no cost in\n\(json)")
            #expect((cost ?? .infinity) < Self.jitThreshold, "\(s.name), generic plan: estimated at \(cost ?? -1)\n\(text)")
            #expect(!text.contains("Seq Scan on jobs"), "\(s.name), generic plan, scans the table:\n\(text)")
        }
        print(
            "estimated costs on a churned table of \(try await c.execute("SELECT count(*) AS n FROM halcyon.jobs").value(0, "n") ?? "?") rows:\n"
                + report.joined(separator: "\n"))

        // The claim still reads each queue's index, and the overview its partial indexes.
        let claimPlan = try await plan(c, claim(6))
        #expect(claimPlan.contains("jobs_claim_idx"), "claim plan:\n\(claimPlan)")
        let rescue = try await plan(c, SQL.Rescue(scan: SQL.ExpiredScan(limit: 100, excluding: [])))
        #expect(rescue.contains("jobs_lease_idx"), "rescue plan:\n\(rescue)")
        let counts = try await plan(c, SQL.OverviewCounts(cap: 100_001))
        // The running rows through either partial index on them (which one is the planner's call:
        // both were seen on the same generated table), the failed and cancelled ones through theirs.
        // The queued rows are half this table: reading their first 100,001 by index or the whole
        // table in parallel cost about the same, and ANALYZE's sample decides — both were seen —
        // so the queued part is bounded by its LIMIT (checked above), not held to an index.
        #expect(
            counts.contains("jobs_unsuccessful_idx") && (counts.contains("jobs_lease_idx") || counts.contains("jobs_running_idx")),
            "counts plan:\n\(counts)")
        // The list's state filter is written in as literals, so a failed-only page reads failed rows.
        let failed = JobQueue.JobFilter(states: [.failed])
        let list = try await plan(c, SQL.CountFilteredCapped(filter: failed, cap: 10_001))
        #expect(list.contains("jobs_unsuccessful_idx"), "failed-jobs count plan:\n\(list)")
    }

    /// What a table's statistics say before a burst: nothing (a new install, never analyzed),
    /// or what a quiet table held (150 finished jobs, analyzed: no row queued).
    enum BeforeTheBurst: CaseIterable { case neverAnalyzed, analyzedWhileQuiet }

    /// A burst: 100,000 jobs inserted in one statement (what a migration or a re-render
    /// enqueues), before autovacuum's next pass, so the planner goes by statistics that know
    /// nothing of them. A worker's claim (with its sibling search), heartbeat and completion, run
    /// for real (`EXPLAIN ANALYZE`, rolled back): no node reads past a thousand rows it then
    /// throws away, and none scans the table — their plans may not depend on statistics.
    @Test(arguments: BeforeTheBurst.allCases)
    func aBurstIsClaimedOnItsIndexesBeforeItIsAnalyzed(_ before: BeforeTheBurst) async throws {
        let db = try await TestDatabase.create()
        let c = try await db.connect()
        defer { Task { await c.close() } }
        try await c.execute("ALTER TABLE halcyon.jobs SET (autovacuum_enabled = false)")
        if before == .analyzedWhileQuiet {
            try await c.execute(
                """
                INSERT INTO halcyon.jobs (source, state, started_at, finished_at)
                SELECT 'https://img.example/done-' || g || '.jpg', 'succeeded', now(), now() FROM generate_series(1, 150) AS g
                """)
            try await c.execute("ANALYZE halcyon.jobs")
        }
        var backlog = Backlog(queued: 100_000, history: 0, sources: (1...40).map { "https://img.example/\($0).jpg" })
        backlog.delayedEvery = nil
        try await backlog.enqueue(c, jobs: 0..<100_000)
        let analyzed = try await c.execute(
            "SELECT coalesce(last_analyze, last_autoanalyze) IS NOT NULL AS analyzed FROM pg_stat_user_tables WHERE relid = 'halcyon.jobs'::regclass"
        ).value(0, "analyzed")
        #expect(analyzed == (before == .analyzedWhileQuiet ? "t" : "f"))

        func run(_ name: String, _ query: any Query) async throws {
            try await c.execute("BEGIN")
            let lines = try await c.execute("EXPLAIN (ANALYZE, BUFFERS) " + query.text, query.parameters.values).rows.compactMap { $0[0] }
            try await c.execute("ROLLBACK")
            let text = lines.joined(separator: "\n")
            // Per loop, as EXPLAIN counts them: times the loops, what the node discarded in all.
            let discarded = zip(lines, lines.indices).compactMap { line, index -> Int? in
                guard let r = line.range(of: "Rows Removed by Filter: "), let n = Int(line[r.upperBound...].prefix { $0.isNumber }) else {
                    return nil
                }
                let node = lines[..<index].last { $0.contains("loops=") } ?? ""
                let loops = node.range(of: "loops=").flatMap { Int(node[$0.upperBound...].prefix { $0.isNumber }) } ?? 1
                return n * loops
            }
            #expect((discarded.max() ?? 0) <= 1000, "\(name) reads and discards \(discarded.max() ?? 0) rows:\n\(text)")
            #expect(!text.contains("Seq Scan on jobs"), "\(name) scans the table:\n\(text)")
        }
        let claim = SQL.Claim(workerID: "w", limit: 6, lease: .seconds(30), maxBytes: 67_108_864, queues: [], siblings: true)
        try await run("claim", claim)
        // Claims held, for the heartbeat and the completion.
        let claimed = try await c.rows(claim)
        #expect(claimed.count > 6, "the claim took its siblings too: \(claimed.count) jobs")
        let claims = claimed.map(\.job.claim)
        try await run("heartbeat", SQL.HeartbeatJobs(claims: claims, workerID: "w", lease: .seconds(30)))
        let result = JobResult(key: "k", digest: "d", path: "p", bytes: 1, width: 1, height: 1, format: "jpeg", cacheHit: false, source: nil)
        try await run("complete (group commit)", SQL.Complete(workerID: "w", batch: claims.map { ($0, result, StageTimings()) }))
    }

    /// The claim of queues with fair keys (200,000 queued over 2,000 keys and the common share),
    /// with and without fleet-wide limits: on the fair index and the keys' rotation, no scan of
    /// the table, estimated under the JIT threshold. Claim times are printed, not asserted.
    @Test func theFairClaimStaysOnItsIndexes() async throws {
        let db = try await TestDatabase.create()
        let c = try await db.connect()
        defer { Task { await c.close() } }
        try await c.execute(
            """
            INSERT INTO halcyon.jobs (source, fair_key, queue)
            SELECT 'https://img.example/' || g % 40 || '.jpg', CASE WHEN g % 10 = 0 THEN NULL ELSE 'tenant-' || g % 2000 END,
                   CASE WHEN g % 2 = 0 THEN 'default' ELSE 'capped' END
            FROM generate_series(1, 200000) g
            """)
        try await c.execute("SELECT halcyon.set_queue_limits('capped', max_running => 50, max_per_second => 1000, max_running_per_key => 2)")
        try await c.execute("ANALYZE halcyon.jobs")
        try await c.execute("ANALYZE halcyon.fair_turns")
        func claim(_ limit: Int, siblings: Bool = true, limited: Bool = false) -> SQL.Claim {
            SQL.Claim(workerID: "w", limit: limit, lease: .seconds(30), maxBytes: 67_108_864, queues: [], siblings: siblings, limited: limited)
        }
        let statements: [(name: String, query: SQL.Claim)] = [
            ("fair claim", claim(6)), ("fair claim, store hits", claim(250, siblings: false)), ("fair claim, limited", claim(6, limited: true)),
        ]
        for s in statements {
            let json = try await c.execute("EXPLAIN (FORMAT JSON) " + s.query.text, s.query.parameters.values).rows[0][0] ?? ""
            let text = try await plan(c, s.query)
            let cost = Self.totalCost(ofJSONPlan: json) ?? .infinity
            #expect(cost < Self.jitThreshold, "\(s.name): estimated at \(cost)\n\(text)")
            #expect(!text.contains("Seq Scan on jobs"), "\(s.name) scans the table:\n\(text)")
            #expect(text.contains("jobs_fair_idx") && text.contains("fair_turns_order_idx"), "\(s.name) plan:\n\(text)")
            // And the generic plan a worker's prepared claim may settle on.
            let generic = try await genericPlan(c, s.query, format: "")
            let genericCost = Self.totalCost(ofJSONPlan: try await genericPlan(c, s.query, format: "(FORMAT JSON)")) ?? .infinity
            #expect(genericCost < Self.jitThreshold, "\(s.name), generic plan: estimated at \(genericCost)\n\(generic)")
            #expect(!generic.contains("Seq Scan on jobs"), "\(s.name), generic plan, scans the table:\n\(generic)")
        }
        // Claims of 6, each in its own transaction as a worker sends them (the limited one after
        // locking its queue): milliseconds, printed.
        let q = JobQueue(connection: c)
        var times: [Double] = []
        for _ in 0..<60 {
            let start = ContinuousClock.now
            #expect(try await q.claim(workerID: "w", limit: 6, lease: .seconds(30), queues: [("default", nil)]).count == 6)
            let d = ContinuousClock.now - start
            times.append(d.seconds * 1000)
        }
        times.sort()
        print("fair claim of 6 over 200,000 queued and 2,000 keys: median \(times[30]) ms, max \(times[59]) ms")
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
        let retry = try await plan(c, SQL.RetryFiltered(batch: SQL.FilteredBatch(filter: failed, limit: 1000, asOf: "infinity")))
        #expect(retry.contains("jobs_unique_key_unsuccessful_idx") && !retry.contains("Seq Scan on jobs k"), "bulk retry plan:\n\(retry)")
    }

    /// Half a year of usage for 100 keys (432,000 hours): the last day's report reads its hours
    /// by the index on hour, and one queue's by the primary key, never the whole table.
    @Test func usageReportsReadTheirHoursByIndex() async throws {
        let db = try await TestDatabase.create()
        let c = try await db.connect()
        defer { Task { await c.close() } }
        try await c.execute(
            """
            INSERT INTO halcyon.usage (queue, fair_key, hour, succeeded, decode_cpu_ms)
            SELECT 'q' || (k % 4), 'tenant-' || k, date_trunc('hour', now()) - h * interval '1 hour', 1, 1
            FROM generate_series(0, 99) k, generate_series(0, 24 * 180 - 1) h
            """)
        try await c.execute("ANALYZE halcyon.usage")
        let since = JobQueue.usageHour(Date().addingTimeInterval(-86_400))
        let day = try await plan(c, SQL.UsageReport(request: UsageRequest(since: since, byFairKey: true, sort: .cpu, limit: 50)))
        #expect(day.contains("usage_hour_idx") && !day.contains("Seq Scan on usage "), "usage report plan:\n\(day)")
        let queue = try await plan(c, SQL.UsageReport(request: UsageRequest(since: since, hourly: true, queue: "q1")))
        #expect(!queue.contains("Seq Scan on usage "), "one queue's usage report plan:\n\(queue)")

        // From the window's totals (built, then 20,000 more keys), a page in each order is read
        // from that order's index.
        _ = try await JobQueue(connection: c).keepUsageWindows(retain: .days(400))
        try await c.execute(
            """
            INSERT INTO halcyon.usage_totals (period, queue, fair_key, hours, succeeded, failed, cancelled, retried, decode_cpu_ms,
                                              process_cpu_ms, encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits)
            SELECT '24h', 'q0', 'more-' || k, 1, k % 7, k % 3, 0, 0, k % 11, 1, 1, 1, k % 13, k % 17, 0 FROM generate_series(1, 20000) k
            """)
        try await c.execute("ANALYZE halcyon.usage_totals")
        let indexes: [UsageRequest.Sort: String] = [
            .cpu: "usage_totals_cpu_idx", .succeeded: "usage_totals_succeeded_idx", .failed: "usage_totals_failed_idx",
            .fetched: "usage_totals_fetched_idx", .stored: "usage_totals_stored_idx", .key: "usage_totals_pkey",
        ]
        for (sort, index) in indexes {
            let totals = try await plan(c, SQL.UsageTotalsReport(request: UsageRequest(since: since, byFairKey: true, sort: sort, limit: 50)))
            #expect(totals.contains(index), "usage totals report by \(sort) plan:\n\(totals)")
        }
    }

    /// Statements only the CLI and the dashboard send, never prepared.
    static let unprepared: Set<String> = ["job states (wait)", "overview counts", "overview failures", "overview throughput", "overview queues"]

    /// The generic plan of `query` (`EXPLAIN <format> EXECUTE` of it prepared, under
    /// `plan_cache_mode = force_generic_plan`): what a prepared call runs once PostgreSQL settles
    /// on planning it once.
    private func genericPlan(_ c: PGConnection, _ query: any Query, format: String) async throws -> String {
        try await c.executeScript("DEALLOCATE ALL; SET plan_cache_mode = force_generic_plan")
        try await c.execute("PREPARE probe AS " + query.text)
        let literals = query.parameters.values.map { $0.map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" } ?? "NULL" }
        let arguments = literals.isEmpty ? "" : "(" + literals.joined(separator: ", ") + ")"
        let rows = try await c.execute("EXPLAIN \(format) EXECUTE probe\(arguments)").rows
        try await c.executeScript("DEALLOCATE ALL; RESET plan_cache_mode")
        return rows.compactMap { $0[0] }.joined(separator: "\n")
    }

    /// The text plan of `query` with its parameters bound (generic plans see them as unknowns, so
    /// the custom plan a real call gets is what is shown).
    private func plan(_ c: PGConnection, _ query: any Query) async throws -> String {
        try await c.execute("EXPLAIN " + query.text, query.parameters.values).rows.compactMap { $0[0] }.joined(separator: "\n")
    }

    /// The top node's "Total Cost" in an `EXPLAIN (FORMAT JSON)` document.
    static func totalCost(ofJSONPlan text: String) -> Double? {
        guard case .array(let docs)? = JSONValue.parse(text), case .object(let doc)? = docs.first, case .object(let plan)? = doc["Plan"]
        else { return nil }
        return plan["Total Cost"]?.numberValue
    }
}
