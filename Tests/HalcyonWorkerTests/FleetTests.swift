import Foundation
import HalcyonQueue
import HalcyonSamples
import HalcyonTestSupport
import Testing

/// Fair keys and fleet-wide queue limits with real workers: a tenant's few jobs are not held up
/// by another's backlog, and a queue's `max_running` holds across workers. (The claim's own
/// cases, limits per key and per second among them: `FairShareTests`.)
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .workers)
struct FleetTests {
    /// Tiny, so a debug worker goes through hundreds of them quickly.
    static let tiny: Data = try! SampleImages.photo(width: 32, height: 24, seed: 11)

    func worker(_ db: TestDatabase, store: URL, concurrency: Int, _ extra: [String] = []) async throws -> TestWorker {
        let w = try TestWorker(
            ["work", "--store", store.path, "--log-level", "info", "--allow-network", "127.0.0.1/32", "--concurrency", "\(concurrency)"] + extra,
            conninfo: db.conninfo)
        try await w.ready()
        return w
    }

    func count(_ db: TestDatabase, _ whereClause: String) async throws -> Int {
        Int(try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE \(whereClause)").value(0, "n") ?? "") ?? -1
    }

    /// One worker at its defaults (concurrency 2, fetch-ahead 8), a tenant's backlog of 1,500
    /// jobs — and, in the second case, 3,000 other keys with a job each scheduled a day ahead;
    /// once 100 are done another tenant enqueues 30: all 30 are among the first 70 jobs finished
    /// after they arrived (by `finished_at`: two per late job, and what the worker had in hand),
    /// and the claims alternate (the last of them within the first 66 claimed).
    @Test(arguments: [0, 3000]) func aTenantsFewJobsAreNotHeldUpByAnothersBacklog(idleKeys: Int) async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("fleet-fair")
        let url = try Origin.publish("fleet-\(db.name).jpg", Self.tiny)
        let chain = "resize(16x16) |> format(png)"
        try await db.query(
            "INSERT INTO halcyon.jobs (source, processors, fair_key) SELECT $1 || '?j=' || g, $2, 'backfill' FROM generate_series(1, 1500) g",
            [url, chain])
        try await db.query(
            """
            INSERT INTO halcyon.jobs (source, processors, fair_key, run_at)
            SELECT $1 || '?idle=' || g, $2, 'idle-' || g, now() + interval '1 day' FROM generate_series(1, $3::int) g
            """, [url, chain, "\(idleKeys)"])
        let w = try await worker(db, store: store, concurrency: 2)
        #expect(try await waitForProgress({ try await count(db, "state = 'succeeded'") }, until: { $0 >= 100 }), "\(w.output.suffix(2000))")
        try await db.query(
            "INSERT INTO halcyon.jobs (source, processors, fair_key) SELECT $1 || '?late=' || g, $2, 'upload' FROM generate_series(1, 30) g",
            [url, chain])
        // They arrived when claims could see them: after the insert committed (its rows' created_at
        // is its start, and a claim between start and commit could not take them).
        let arrived = try await db.query("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS at").value(0, "at")
        #expect(try await waitForProgress({ try await count(db, "fair_key = 'upload' AND state = 'succeeded'") }, until: { $0 == 30 }))
        // Completions in the order the worker completed them: the claim's time plus the job's
        // `total_ms` (claim to outcome). `finished_at` is when a group commit recorded it, which
        // on a loaded machine lumps several completions, the backlog's first (lower ids).
        let done = "started_at + (timings ->> 'total_ms')::float8 * interval '1 millisecond'"
        let place = try await db.query(
            """
            SELECT count(*) FILTER (WHERE \(done) <= (SELECT max(\(done)) FROM halcyon.jobs WHERE fair_key = 'upload')) AS n,
                   count(*) FILTER (WHERE finished_at <= (SELECT max(finished_at) FROM halcyon.jobs WHERE fair_key = 'upload')) AS recorded
            FROM halcyon.jobs
            WHERE state = 'succeeded' AND \(done) >= $1::timestamptz
            """, [arrived])
        let position = Int(place.value(0, "n") ?? "") ?? -1
        // The claim's own fairness, without the jobs in flight when they came or the recording's lag.
        let claimPlace = try await db.query(
            """
            SELECT count(*) AS n FROM halcyon.jobs
            WHERE started_at >= $1::timestamptz
              AND started_at <= (SELECT max(started_at) FROM halcyon.jobs WHERE fair_key = 'upload')
            """, [arrived])
        let claimPosition = Int(claimPlace.value(0, "n") ?? "") ?? -1
        let backlogLeft = try await count(db, "fair_key = 'backfill' AND state = 'queued'")
        print(
            "fleet (\(idleKeys) idle keys): the last of 30 late jobs was job \(position) to finish (\(place.value(0, "recorded") ?? "?") by the time it was recorded) and job \(claimPosition) to be claimed after they arrived (\(backlogLeft) of the backlog still queued)"
        )
        #expect(claimPosition > 0 && claimPosition <= 66, "the last of the 30 was job \(claimPosition) to be claimed after they arrived")
        // The order they finished in (u: a late job, b: the backlog), and what the late ones went through.
        let order = try await db.query(
            """
            SELECT string_agg(CASE fair_key WHEN 'upload' THEN 'u' ELSE 'b' END, '' ORDER BY \(done), id) AS seq,
                   (SELECT string_agg(attempt || ':' || to_char(started_at - $1::timestamptz, 'SS.MS'), ' ' ORDER BY id)
                    FROM halcyon.jobs WHERE fair_key = 'upload') AS late
            FROM halcyon.jobs WHERE state = 'succeeded' AND \(done) >= $1::timestamptz
              AND \(done) <= (SELECT max(\(done)) FROM halcyon.jobs WHERE fair_key = 'upload')
            """, [arrived])
        #expect(
            position > 0 && position <= 70,
            """
            the last of the 30 was job \(position) to finish after they arrived; order \(order.value(0, "seq") ?? "?"); \
            the late jobs' attempts and starts after arrival: \(order.value(0, "late") ?? "?")
            \(w.output.suffix(3000))
            """)
        #expect(backlogLeft > 0, "the backlog was drained before the test could tell")
        #expect(try await count(db, "state = 'failed'") == 0)
        // Stopped the way a deploy stops it, and waited for: it holds ten jobs of a long backlog.
        w.signal(SIGTERM)
        #expect(await w.wait(timeout: 60) == 0, "\(w.output.suffix(2000))")
    }

    /// Three workers of concurrency 3 on a queue with `max_running = 2`, each job held ~0.3 s by
    /// a slow origin: the queue's running count, sampled all along, never goes above 2 — and
    /// reaches it, the workers taking turns. Each worker holds at most one of the queue's jobs
    /// (`--queue origin=1`), so only the fleet's limit keeps three from running at once; left
    /// to fill both slots alone, the first worker ready took all 24 jobs on a fresh-clone run
    /// (a worker whose own job finished is woken at once; the others poll every 100 ms).
    @Test(.processes(3)) func aQueueCapHoldsAcrossWorkers() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("fleet-cap")
        _ = try Origin.publish("fleet-\(db.name).jpg", Self.tiny)
        try await db.query("SELECT halcyon.set_queue_limits('origin', max_running => 2)")
        try await db.query(
            """
            INSERT INTO halcyon.jobs (source, processors, queue)
            SELECT $1 || '?j=' || g, 'resize(16x16) |> format(png)', 'origin' FROM generate_series(1, 24) g
            """, ["\(TestEnvironment.origin)/slowfile/0.3/fleet-\(db.name).jpg"])
        var workers: [TestWorker] = []
        for _ in 0..<3 {
            workers.append(
                try await worker(db, store: store, concurrency: 3, ["--log-level", "debug", "--poll-interval", "100ms", "--queue", "origin=1"]))
        }
        let c = try await db.connect()
        defer { Task { await c.close() } }
        var highest = 0, samples = 0, finished = 0
        let done = try await waitForProgress(
            {
                // Sampled as fast as a query returns, between the progress checks.
                for _ in 0..<20 {
                    let running = try await c.execute("SELECT count(*) AS n FROM halcyon.jobs WHERE queue = 'origin' AND state = 'running'")
                    highest = max(highest, Int(running.value(0, "n") ?? "") ?? 0)
                    samples += 1
                }
                finished = try await count(db, "queue = 'origin' AND state IN ('succeeded', 'failed')")
                return finished
            }, until: { $0 == 24 })
        #expect(done, "\(finished) of 24 finished")
        #expect(highest == 2, "the most running at once, in \(samples) samples: \(highest)")
        #expect(try await count(db, "queue = 'origin' AND state = 'succeeded'") == 24)
        #expect(workers.filter { $0.output.contains("job claimed") }.count >= 2, "one worker took every job")
    }
}
