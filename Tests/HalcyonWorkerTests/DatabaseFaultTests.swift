import Foundation
import HalcyonImage
import HalcyonQueue
import HalcyonSamples
import HalcyonTestSupport
import Testing

/// The database says no, or is slow for some rows: only those jobs are affected, the worker
/// neither retries a refusal forever nor lets one locked row hold back every lease.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .workers)
struct DatabaseFaultTests {
    func count(_ db: TestDatabase, _ whereClause: String) async throws -> Int {
        Int(try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE \(whereClause)").value(0, "n") ?? "") ?? -1
    }

    /// An application's audit trigger raises for some rows. Recording used to retry such an
    /// error forever (the job stayed `running`, heartbeated, until the worker was stopped) and
    /// one refused row blocked its whole group-commit batch. Now: the refusal is noted on the
    /// row and logged as an error, the rest of the batch is recorded, the lease lapses, the
    /// rescue moves on, and the worker stops promptly.
    @Test func aTriggerRefusingSomeOutcomesFailsOnlyThoseJobs() async throws {
        let url = try Origin.publish("dbfault.png", try SampleImages.solid(width: 8, height: 8, red: 1, green: 2, blue: 3))
        let db = try await TestDatabase.create()
        try await db.query(
            """
            CREATE FUNCTION public.audit() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.state IN ('succeeded', 'failed') AND NEW.cache_key LIKE 'refused-%' THEN
                    RAISE EXCEPTION 'audit rejected';
                END IF;
                RETURN NEW;
            END $$
            """)
        try await db.query("CREATE TRIGGER audit BEFORE UPDATE ON halcyon.jobs FOR EACH ROW EXECUTE FUNCTION public.audit()")
        // 60 small jobs in one claim (their outcomes share group commits) and two refused ones:
        // a success and a permanent failure.
        for i in 0..<60 {
            _ = try await db.query("SELECT halcyon.enqueue($1, processors => 'format(png)', cache_key => $2)", [url, "ok-\(i)"])
        }
        _ = try await db.query("SELECT halcyon.enqueue($1, processors => 'format(png)', cache_key => 'refused-success', max_attempts => 2)", [url])
        _ = try await db.query(
            "SELECT halcyon.enqueue($1, cache_key => 'refused-failure', max_attempts => 2)", ["\(TestEnvironment.origin)/status/404?dbfault"])
        let w = try TestWorker(
            [
                "work", "--store", try TestEnvironment.temporaryDirectory("store").path, "--allow-network", "127.0.0.1/32",
                "--lease", "2s", "--retry-base", "0s", "--hit-claim-batch", "100", "--log-level", "info",
            ], conninfo: db.conninfo)
        #expect(try await waitUntil(60) { try await count(db, "state = 'succeeded'") == 60 }, "\(w.output.suffix(2000))")
        // Each refused job: the refusal noted, rescued when its lease lapsed, refused again at its
        // last attempt, and then the rescue itself refused and set aside (logged once).
        #expect(
            try await waitUntil(60) { w.output.components(separatedBy: "the database refused to rescue this job").count == 3 },
            "\(w.output.suffix(3000))")
        let refusals = try await count(db, "cache_key LIKE 'refused-%' AND errors @> '[{\"code\": \"worker.outcome_rejected\"}]'")
        #expect(refusals == 2)
        #expect(try await count(db, "cache_key LIKE 'refused-%' AND errors @> '[{\"code\": \"worker.lease_expired\"}]'") == 2)
        #expect(w.output.contains("ERROR the database refused this job's success"))
        #expect(w.output.contains("ERROR the database refused this job's failure (fetch.http_status)"))
        // Never retried as if the database were down.
        #expect(!w.output.contains("recording complete failed; retrying") && !w.output.contains("recording fail failed; retrying"))
        #expect(w.isRunning)
        w.signal(SIGTERM)
        let signalled = ContinuousClock.now
        #expect(await w.wait(timeout: 30) == 0)
        #expect(ContinuousClock.now - signalled < .seconds(20))  // nothing held: no grace to wait out
    }

    /// A constraint that refuses a job's success (here: an application's rule about results) but
    /// not its failure: the job fails at once with `worker.outcome_rejected`, on its first
    /// attempt — it used to wait for its lease to lapse and run again, five times.
    @Test func aRefusedSuccessFailsTheJobAtOnce() async throws {
        let url = try Origin.publish("dbfault-once.png", try SampleImages.solid(width: 8, height: 8, red: 4, green: 5, blue: 6))
        let db = try await TestDatabase.create()
        try await db.query(
            """
            ALTER TABLE halcyon.jobs ADD CONSTRAINT app_no_png_results
                CHECK (result_format IS DISTINCT FROM 'png' OR cache_key NOT LIKE 'refused-%')
            """)
        _ = try await db.query("SELECT halcyon.enqueue($1, processors => 'format(png)', cache_key => 'refused-once')", [url])
        _ = try await db.query("SELECT halcyon.enqueue($1, processors => 'format(png)', cache_key => 'fine')", [url])
        let w = try TestWorker(
            [
                "work", "--drain", "--store", try TestEnvironment.temporaryDirectory("store").path, "--allow-network", "127.0.0.1/32",
                "--lease", "2s", "--log-level", "info",
            ], conninfo: db.conninfo)
        #expect(await w.wait(timeout: 120) == 0, "\(w.output.suffix(2000))")
        let row = try await db.query(
            "SELECT state::text, attempt, errors->-1->>'code' AS code, last_error FROM halcyon.jobs WHERE cache_key = 'refused-once'")
        #expect(row.value(0, "state") == "failed" && row.value(0, "attempt") == "1", "\(row.rows)")
        #expect(row.value(0, "code") == "worker.outcome_rejected", "\(row.rows)")
        #expect(row.value(0, "last_error")?.contains("app_no_png_results") == true, "\(row.rows)")
        #expect(try await count(db, "cache_key = 'fine' AND state = 'succeeded'") == 1)
        #expect(w.output.contains("the job failed with worker.outcome_rejected"), "\(w.output.suffix(2000))")
    }

    /// An operator's long `SELECT … FOR UPDATE` on one running row used to block the worker's
    /// one heartbeat statement for every job, so their leases lapsed and a peer rescued them all.
    /// Now the heartbeat skips the locked row and renews the others.
    @Test func aLockOnOneRunningRowDoesNotStopTheOtherLeases() async throws {
        _ = try Origin.publish("dbfault.jpg", try SampleImages.photo(width: 64, height: 48, seed: 5))
        let db = try await TestDatabase.create()
        for i in 0..<4 {
            _ = try await db.query(
                "SELECT halcyon.enqueue($1, processors => 'format(png)', cache_key => $2)",
                ["\(TestEnvironment.origin)/slowfile/12/dbfault.jpg?i=\(i)", "lock-\(i)"])
        }
        let store = try TestEnvironment.temporaryDirectory("store")
        // A 6 s lease (renewed every 2 s): room for a loaded machine, the whole suite on 2 cores.
        let args = ["work", "--store", store.path, "--allow-network", "127.0.0.1/32", "--lease", "6s", "--log-level", "info"]
        let holder = try TestWorker(args + ["--concurrency", "2", "--fetch-concurrency", "4", "--log-level", "debug"], conninfo: db.conninfo)
        // One session polls and locks in the same step: a row seen running by one statement
        // and looked for by the next was gone twice under the full suite (finished, or its
        // lease rescued on an overloaded machine) — CI saw "no running row left to lock".
        // Each poll takes the lock only while at least two rows are running (one locked, the
        // other's lease at stake), else rolls back and polls again.
        let operatorSession = try await db.connect()
        var locked: String?
        let gotLock = try await waitUntil(60) {
            try await operatorSession.execute("BEGIN")
            locked = try await operatorSession.execute(
                """
                SELECT id FROM halcyon.jobs
                WHERE state = 'running' AND (SELECT count(*) FROM halcyon.jobs WHERE state = 'running') >= 2
                ORDER BY id LIMIT 1 FOR UPDATE
                """
            ).value(0, "id")
            if locked == nil { try await operatorSession.execute("ROLLBACK") }
            return locked != nil
        }
        if !gotLock {
            // What the worker was doing: its sessions and the rows (the holder logs at debug, so
            // its claims show too).
            _ = try? await operatorSession.execute("ROLLBACK")
            let sessions = try await db.query(
                """
                SELECT a.application_name, a.state, a.wait_event_type, a.wait_event, left(a.query, 100) AS query
                FROM pg_stat_activity a WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
                """)
            let rows = try await db.query("SELECT id, state::text, attempt, locked_by, run_at::text FROM halcyon.jobs ORDER BY id")
            Issue.record(
                "never two running rows to lock one of; rows \(rows.dictionaries); sessions \(sessions.dictionaries); \(holder.output.suffix(4000))")
            return
        }
        let lockedID = try #require(locked)
        // A second worker, the would-be rescuer (nothing is left for it to claim).
        let peer = try TestWorker(args, conninfo: db.conninfo)
        try await Task.sleep(for: .seconds(10))  // longer than a lease, shorter than the downloads
        try await operatorSession.execute("COMMIT")
        await operatorSession.close()
        #expect(try await waitUntil(60) { try await count(db, "state = 'succeeded'") == 4 }, "\(holder.output.suffix(2000))")
        let rescuedOthers = try await count(db, "id <> \(lockedID) AND errors @> '[{\"code\": \"worker.lease_expired\"}]'")
        #expect(rescuedOthers == 0, "unlocked jobs lost their leases: \(holder.output.suffix(1500))")
        #expect(holder.output.contains("rows locked by another session"))
        for w in [holder, peer] {
            w.signal(SIGTERM)
            #expect(await w.wait(timeout: 30) == 0)
        }
    }
}
