import Foundation
import HalcyonDomain
import HalcyonEmbedded
import HalcyonQueue
import HalcyonRuntime
import HalcyonSamples
import HalcyonTestSupport
import Testing

/// Crash containment: `halcyon work` supervises a child that does the image work. A death of
/// the child costs the jobs it had in processing one attempt (`worker.crashed`), releases the
/// others without charge, and a new child goes on at once — not after a lease. Real faults are
/// injected with `HALCYON_TEST_FAULT` through the suite's `halcyon-faults` build (a store
/// through a bad pointer, a runaway allocation, a call that never returns) and a real SIGKILL,
/// as the OOM killer sends it. The `halcyon` users run has no fault injection at all.
// Their workers keep both cores busy for seconds: each test takes two process slots.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes(2))
struct CrashContainmentTests {
    struct Row {
        var state: String
        var attempt: Int
        var crashes: Int
        var code: String?
        var lastError: String
    }

    static func rows(_ db: TestDatabase, _ ids: [String]) async throws -> [String: Row] {
        let r = try await db.query(
            """
            SELECT id, state::text, attempt, errors->-1->>'code' AS code, coalesce(last_error, '') AS last_error,
                   (SELECT count(*) FROM jsonb_array_elements(errors) e WHERE e->>'code' = 'worker.crashed') AS crashes
            FROM halcyon.jobs WHERE id = ANY($1::bigint[])
            """, ["{" + ids.joined(separator: ",") + "}"])
        var out: [String: Row] = [:]
        for i in 0..<r.count {
            out[r.value(i, "id")!] = Row(
                state: r.value(i, "state") ?? "", attempt: Int(r.value(i, "attempt") ?? "") ?? -1, crashes: Int(r.value(i, "crashes") ?? "") ?? -1,
                code: r.value(i, "code"), lastError: r.value(i, "last_error") ?? "")
        }
        return out
    }

    static func enqueue(_ db: TestDatabase, _ source: String, _ chain: String, priority: Int = 0) async throws -> String {
        try await db.query(
            "SELECT halcyon.enqueue($1, processors => $2, priority => $3::int) AS id", [source, chain, String(priority)]
        ).value(0, "id")!
    }

    static func quickJobs(_ db: TestDatabase, count: Int, tag: String) async throws -> [String] {
        let small = try Origin.publish("crash-\(tag)-small.png", try SampleImages.photo(width: 300, height: 200, seed: 8, format: .png))
        var ids: [String] = []
        // Each its own source (a query the origin ignores): one job per group, so that the jobs in
        // processing at any moment are at most one per slot.
        for i in 0..<count { ids.append(try await enqueue(db, "\(small)?n=\(i)", "resize(\(16 + i)x\(16 + i)) |> format(png)")) }
        return ids
    }

    /// A worker on `db`, once it is ready.
    static func worker(
        _ db: TestDatabase, _ extra: [String], fault: String? = nil, environment: [String: String] = [:]
    ) async throws
        -> HalcyonProcess
    {
        let w = try HalcyonProcess(
            [
                "work", "--no-progress", "--store", try TestEnvironment.temporaryDirectory("store").path,
                "--allow-network", "127.0.0.1/32", "--fetch-retries", "0", "--lease", "60s",
            ] + extra, conninfo: db.conninfo, environment: environment.merging(fault.map { ["HALCYON_TEST_FAULT": $0] } ?? [:]) { $1 },
            executable: TestEnvironment.faultsBinary)
        try await w.ready()
        return w
    }

    /// SIGKILL to the child while it processes slow jobs among many quick ones, with two slots:
    /// the drain goes on within seconds (the lease is 60 s), only the jobs in processing at that
    /// moment are charged, every job ends, the worker exits 0.
    /// `halcyon` itself cannot be made to crash by the variable: the job its marker names runs
    /// and succeeds, and the binary does not even hold the variable's name; the fault-injecting
    /// build does (so the check could fail).
    @Test func theShippedBinaryHasNoFaultInjection() async throws {
        for (binary, expected) in [(TestEnvironment.binary, false), (TestEnvironment.faultsBinary, true)] {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: binary), options: .mappedIfSafe)
            #expect((bytes.range(of: Data("HALCYON_TEST_FAULT".utf8)) != nil) == expected, "\(binary)")
        }
        let db = try await TestDatabase.create()
        let id = try await Self.enqueue(
            db, try Origin.publish("crash-shipped.png", try SampleImages.photo(width: 120, height: 80, seed: 9, format: .png)) + "?segv-marker",
            "resize(30x30) |> format(png)")
        let w = try HalcyonProcess(
            [
                "work", "--drain", "--no-progress", "--store", try TestEnvironment.temporaryDirectory("store").path,
                "--allow-network", "127.0.0.1/32",
            ], conninfo: db.conninfo, environment: ["HALCYON_TEST_FAULT": "segv:segv-marker"])
        #expect(await w.wait(timeout: 120) == 0, "\(w.output.suffix(2000))")
        let row = try #require(try await Self.rows(db, [id])[id])
        #expect(row.state == "succeeded" && row.attempt == 1 && row.crashes == 0, "\(row)")
    }

    @Test func aKilledImageProcessCostsOnlyTheJobsInProcessing() async throws {
        let db = try await TestDatabase.create()
        let big = try Origin.publish("crash-kill-big.jpg", try SampleImages.photo(width: 2000, height: 2000, seed: 9))
        var slow: [String] = []
        for i in 0..<4 { slow.append(try await Self.enqueue(db, "\(big)?n=\(i)", "blur(\(30 + i)) |> format(png)", priority: 10)) }
        let quick = try await Self.quickJobs(db, count: 30, tag: "kill")
        let w = try await Self.worker(db, ["--drain", "--concurrency", "2"])
        // A slow job claimed, then in processing for a moment.
        let claimed = try await waitUntil(60) {
            try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE state = 'running' AND priority = 10").value(0, "n") != "0"
        }
        #expect(claimed, "\(w.output.suffix(2000))")
        try await Task.sleep(for: .milliseconds(800))
        let child = try #require(w.children.first, "no child process: \(w.output.suffix(2000))")
        #expect(kill(child, SIGKILL) == 0)
        let killed = Date()
        // The next job to finish finishes before a 60 s lease could lapse (seconds on an idle
        // machine; the bound leaves room for the suite's load).
        let resumed = try await waitUntil(120) {
            try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE finished_at > $1::timestamptz", [ISO8601.format(killed)])
                .value(0, "n") != "0"
        }
        let took = Date().timeIntervalSince(killed)
        #expect(resumed, "nothing finished within 45 s of the kill (the lease is 60 s): \(w.output.suffix(3000))")
        #expect(await w.wait(timeout: 180) == 0, "\(w.output.suffix(3000))")
        let line = try #require(w.output.split(separator: "\n").first { $0.contains("the worker process died") }, "\(w.output.suffix(3000))")
        let charged =
            line.firstRange(of: "charged=[").map { line[$0.upperBound...].prefix { $0 != "]" } }?
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } ?? []
        print("SIGKILL mid-processing: charged \(charged), next job finished \(String(format: "%.1f", took)) s after the kill")
        #expect(!charged.isEmpty && charged.count <= 2, "\(line)")
        let rows = try await Self.rows(db, slow + quick)
        for (id, row) in rows {
            #expect(row.state == "succeeded", "job \(id): \(row.state) \(row.lastError)")
            let wasCharged = charged.contains(id)
            #expect(row.crashes == (wasCharged ? 1 : 0), "job \(id): \(row.crashes) worker.crashed entries")
            #expect(row.attempt == (wasCharged ? 2 : 1), "job \(id): attempt \(row.attempt) (released jobs spend none)")
        }
    }

    /// A late outcome after a restart: the child holding a job (downloading it, so it is
    /// released, not charged) is SIGKILLed; the supervisor releases the job and a new child
    /// claims it again. What the old child could still say about its claim — an outcome sent
    /// just before it died and held up on its way (a busy server, a pooler's queue) — must not
    /// land on the new child's claim. The old claim is replayed through the queue as it was —
    /// with the same id, attempt (a release gives it back) and worker id (a child keeps its
    /// parent's): only the claim's stamp tells the two apart.
    @Test func theRestartedChildsClaimTakesNoOutcomeOfTheOldChild() async throws {
        let db = try await TestDatabase.create()
        let png = try Origin.publish("crash-late.png", try SampleImages.photo(width: 64, height: 48, seed: 12, format: .png))
        let source = png.replacingOccurrences(of: "/files/", with: "/slowfile/20/") + "?late=\(db.name)"
        let id = try await Self.enqueue(db, source, "format(png)")
        let w = try await Self.worker(db, ["--concurrency", "1"])
        defer { w.signal(SIGKILL) }
        let query = "SELECT state::text, attempt, locked_by, started_at::text AS started FROM halcyon.jobs WHERE id = $1::bigint"
        #expect(try await waitUntil(60) { try await db.query(query, [id]).value(0, "state") == "running" }, "\(w.output.suffix(2000))")
        let old = try await db.query(query, [id])
        let workerID = try #require(old.value(0, "locked_by"))
        let c = try await db.connect()
        defer { Task { await c.close() } }
        let q = JobQueue(connection: c)
        // The claim as the old child holds it (the supervisor reads held claims the same way).
        let oldClaim = try #require(try await q.heldJobs(workerID: workerID).first { $0.claim.id == Int64(id)! }?.claim)
        #expect(oldClaim.stamp != nil && oldClaim.attempt == Int(old.value(0, "attempt") ?? ""))
        let child = try #require(w.children.first, "no child process: \(w.output.suffix(2000))")
        #expect(kill(child, SIGKILL) == 0)
        // Released (attempt given back) and claimed again by the new child, under the same worker id.
        let reclaimed = try await waitUntil(60) {
            let r = try await db.query(query, [id])
            return r.value(0, "state") == "running" && r.value(0, "started") != old.value(0, "started")
        }
        #expect(reclaimed, "\(w.output.suffix(3000))")
        let new = try await db.query(query, [id])
        let newClaim = try #require(try await q.heldJobs(workerID: workerID).first { $0.claim.id == Int64(id)! }?.claim)
        print("restart: old claim \(oldClaim) \(oldClaim.stamp ?? "?"), new claim \(newClaim) \(newClaim.stamp ?? "?"), both by \(workerID)")
        #expect(
            new.value(0, "locked_by") == workerID && newClaim.attempt == oldClaim.attempt, "the case this test is about: same worker id and attempt")
        #expect(newClaim.stamp != oldClaim.stamp)
        let result = JobResult(key: "late", digest: "d", path: "p", bytes: 1, width: 1, height: 1, format: "png", cacheHit: false, source: nil)
        #expect(try await q.complete(oldClaim, workerID: workerID, result: result) == false, "the old child's late success landed on the new claim")
        let failed = try await q.fail(oldClaim, workerID: workerID, error: HalcyonError(.internal, "late"), retryDelay: .zero)
        #expect(failed == .notOwned, "the old child's late failure landed on the new claim")
        #expect(try await q.release([oldClaim], workerID: workerID) == 0, "the old child's late release let go of the new claim")
        let after = try await db.query(query, [id])
        #expect(after.value(0, "state") == "running" && after.value(0, "started") == new.value(0, "started"), "\(after.dictionaries)")
        w.signal(SIGTERM)
        _ = await w.wait(timeout: 60)
    }

    /// A real fault in image work (SIGSEGV on the processing thread), a runaway allocation over
    /// `--max-memory`, and a call that never returns past `--max-job-time` (5 s: the image process
    /// is ended 5 s after the decode's and the job's deadlines), in one drain with one
    /// slot: the faulting job fails for good on its second crash (a poison pill; it had five
    /// attempts), the runaway one too with the ceiling named, the stuck one as `image.too_costly`;
    /// every other job succeeds on its first attempt; the restarts are counted and shown.
    @Test func realFaultsAreContainedAndAPoisonPillFailsForGood() async throws {
        let db = try await TestDatabase.create()
        let image = try SampleImages.photo(width: 400, height: 300, seed: 10, format: .png)
        let segv = try await Self.enqueue(db, try Origin.publish("crash-fault-segv.png", image), "resize(40x40) |> format(png)")
        let runaway = try await Self.enqueue(db, try Origin.publish("crash-fault-runaway.png", image), "resize(41x41) |> format(png)")
        let stuck = try await Self.enqueue(db, try Origin.publish("crash-fault-stuck.png", image), "resize(42x42) |> format(png)")
        let quick = try await Self.quickJobs(db, count: 12, tag: "fault")
        let w = try await Self.worker(
            db, ["--drain", "--concurrency", "1", "--max-memory", "400MiB", "--max-job-time", "5s"],
            fault: "segv:crash-fault-segv;allocate:crash-fault-runaway;hang:crash-fault-stuck")
        #expect(await w.wait(timeout: 240) == 0, "\(w.output.suffix(3000))")
        let rows = try await Self.rows(db, [segv, runaway, stuck] + quick)
        let s = try #require(rows[segv]), r = try #require(rows[runaway]), h = try #require(rows[stuck])
        #expect(s.state == "failed" && s.code == "worker.crashed" && s.crashes == 2 && s.attempt == 2, "\(s)")
        #expect(s.lastError.contains("SIGSEGV") && s.lastError.contains("failed for good"), "\(s.lastError)")
        #expect(r.state == "failed" && r.code == "worker.crashed" && r.crashes == 2, "\(r)")
        #expect(r.lastError.contains("--max-memory"), "\(r.lastError)")
        #expect(h.state == "failed" && h.code == "image.too_costly" && h.attempt == 1, "\(h)")
        #expect(h.lastError.contains("stuck in one call"), "\(h.lastError)")
        for id in quick {
            #expect(rows[id]?.state == "succeeded" && rows[id]?.attempt == 1 && rows[id]?.crashes == 0, "job \(id): \(String(describing: rows[id]))")
        }
        let worker = try await db.query("SELECT restarts, last_crash FROM halcyon.workers ORDER BY started_at DESC LIMIT 1")
        #expect(worker.value(0, "restarts") == "5", "2 segv + 2 over the ceiling + 1 stuck: \(worker.value(0, "restarts") ?? "?")")
        let status = try HalcyonProcess(["status"], conninfo: db.conninfo)
        #expect(await status.wait(timeout: 30) == 0)
        #expect(status.output.contains("restarted 5 times (last: "), "\(status.output)")
        // The dashboard's overview (its page and JSON) reads the same.
        let c = try await db.connect()
        let overview = try await QueueOverview.load(c)
        await c.close()
        #expect(overview.workers.first?.restarts == 5 && overview.workers.first?.lastCrash != nil)
    }

    /// A job stuck in one call ends the image process; the job in processing beside it did
    /// nothing wrong: it is charged `worker.crashed` as a bystander (not counted towards its
    /// poison pill), runs again at once and succeeds, while only the stuck job fails for good.
    /// The bystander hangs too, but in the first image process only and a second after the
    /// stuck job began (its source is slower), so the stuck job is past its deadline first.
    @Test func aStuckJobsKillChargesOnlyItAndItsNeighbourRunsAgain() async throws {
        let db = try await TestDatabase.create()
        let image = try SampleImages.photo(width: 300, height: 200, seed: 14, format: .png)
        let stuck = try await Self.enqueue(db, try Origin.publish("crash-neighbour-stuck.png", image), "resize(40x40) |> format(png)")
        let neighbour = try await Self.enqueue(
            db, "\(TestEnvironment.origin)/slowfile/1.5/\(try Origin.publish("crash-neighbour-beside.png", image).split(separator: "/").last!)",
            "blur(8) |> format(png)")
        let w = try await Self.worker(
            db, ["--drain", "--concurrency", "2", "--max-job-time", "3s"],
            fault: "hang:crash-neighbour-stuck;hangfirst:crash-neighbour-beside")
        #expect(await w.wait(timeout: 180) == 0, "\(w.output.suffix(3000))")
        let rows = try await Self.rows(db, [stuck, neighbour])
        let s = try #require(rows[stuck]), n = try #require(rows[neighbour])
        #expect(s.state == "failed" && s.code == "image.too_costly" && s.attempt == 1, "\(s)")
        #expect(n.state == "succeeded" && n.attempt == 2 && n.crashes == 1, "\(n)")
        let entry = try await db.query(
            "SELECT e->>'message' AS message, e->>'bystander' AS bystander FROM halcyon.jobs, jsonb_array_elements(errors) e WHERE id = $1::bigint",
            [neighbour])
        #expect(entry.value(0, "bystander") == "true", "\(entry.rows)")
        #expect(entry.value(0, "message")?.contains("ended for job \(stuck)") == true, "\(entry.rows)")
    }

    /// A crash whose backtrace takes longer than `--max-job-time` and its grace to write (a
    /// loaded machine symbolicating a large binary) is a crash, not a job stuck in one call: the
    /// supervisor waits for the runtime's backtracer — here a stand-in that takes 6 s, against a
    /// 1 s deadline and 1 s grace — and charges the job `worker.crashed`.
    @Test func aCrashStillWritingItsBacktraceIsNotTakenForAStuckJob() async throws {
        let db = try await TestDatabase.create()
        let image = try SampleImages.photo(width: 200, height: 150, seed: 11, format: .png)
        let segv = try await Self.enqueue(db, try Origin.publish("crash-slow-backtrace.png", image), "resize(30x30) |> format(png)")
        let backtracer = try TestEnvironment.temporaryDirectory("backtracer").appendingPathComponent("swift-backtrace")
        try "#!/bin/sh\nsleep 6\n".write(to: backtracer, atomically: true, encoding: .utf8)
        chmod(backtracer.path, 0o755)
        let w = try await Self.worker(
            db, ["--drain", "--concurrency", "1", "--max-job-time", "1s"], fault: "segv:crash-slow-backtrace",
            environment: ["SWIFT_BACKTRACE": "enable=yes,swift-backtrace=\(backtracer.path)"])
        #expect(await w.wait(timeout: 120) == 0, "\(w.output.suffix(3000))")
        let s = try #require(try await Self.rows(db, [segv])[segv])
        #expect(s.state == "failed" && s.code == "worker.crashed" && s.crashes == 2, "\(s) \(w.output.suffix(3000))")
        #expect(s.lastError.contains("SIGSEGV"), "\(s.lastError)")
        #expect(!w.output.contains("stuck in one call"), "\(w.output.suffix(3000))")
    }

    /// SIGTERM while the supervisor is between two children (right after a crash): it exits 0
    /// promptly, nothing stays `running`, no process is left behind.
    @Test func aStopDuringARestartEndsCleanly() async throws {
        let db = try await TestDatabase.create()
        let image = try SampleImages.photo(width: 400, height: 300, seed: 11, format: .png)
        let crash = try await Self.enqueue(db, try Origin.publish("crash-restart-segv.png", image), "resize(40x40) |> format(png)", priority: 10)
        let big = try Origin.publish("crash-restart-big.jpg", try SampleImages.photo(width: 1500, height: 1500, seed: 12))
        var others: [String] = []
        for i in 0..<6 { others.append(try await Self.enqueue(db, big, "blur(\(20 + i)) |> format(png)")) }
        let w = try await Self.worker(db, ["--concurrency", "1"], fault: "segv:crash-restart-segv")
        let restarting = try await waitUntil(60) { w.output.contains("restarting the worker process") }
        #expect(restarting, "\(w.output.suffix(3000))")
        w.signal(SIGTERM)
        let stopped = Date()
        #expect(await w.wait(timeout: 30) == 0, "\(w.output.suffix(3000))")
        print("stop during a restart: exited \(String(format: "%.1f", Date().timeIntervalSince(stopped))) s after SIGTERM")
        let running = try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE state = 'running'").value(0, "n")
        #expect(running == "0")
        let pids = w.output.split(separator: "\n").filter { $0.contains("worker process started") }.compactMap { line in
            line.firstRange(of: "pid=").map { line[$0.upperBound...].prefix { $0.isNumber } }.flatMap { pid_t($0) }
        }
        #expect(!pids.isEmpty)
        for pid in pids { #expect(kill(pid, 0) != 0, "process \(pid) outlived its supervisor") }
        let rows = try await Self.rows(db, [crash] + others)
        #expect((rows[crash]?.crashes ?? 0) >= 1, "\(String(describing: rows[crash]))")
        for id in others {
            #expect(rows[id]?.crashes == 0 && ["succeeded", "queued"].contains(rows[id]?.state ?? ""), "\(String(describing: rows[id]))")
        }
    }

    /// SIGTERM to the supervisor and its child at once (systemd's control-group kill, Ctrl-C in
    /// a terminal) is one stop request: the job in processing finishes within the grace period
    /// instead of being released as a second signal would.
    @Test func aSignalToTheWholeProcessGroupCountsOnce() async throws {
        let db = try await TestDatabase.create()
        let big = try Origin.publish("crash-group-big.jpg", try SampleImages.photo(width: 1500, height: 1500, seed: 13))
        let id = try await Self.enqueue(db, big, "blur(25) |> format(png)")
        let w = try await Self.worker(db, ["--concurrency", "1", "--grace", "60s"])
        #expect(try await waitUntil(60) { try await db.query("SELECT state::text AS s FROM halcyon.jobs").value(0, "s") == "running" })
        let child = try #require(w.children.first)
        kill(w.pid, SIGTERM)
        kill(child, SIGTERM)
        #expect(await w.wait(timeout: 90) == 0, "\(w.output.suffix(2000))")
        #expect(w.output.contains("stop requested: finishing in-flight jobs"))
        #expect(!w.output.contains("second stop request"), "\(w.output.suffix(2000))")
        let rows = try await Self.rows(db, [id])
        #expect(rows[id]?.state == "succeeded", "\(String(describing: rows[id]))")
    }
}
