import Foundation
import HalcyonEmbedded
import HalcyonImage
import HalcyonQueue
import HalcyonRuntime
import HalcyonSamples
import HalcyonStore
import HalcyonTestSupport
import Testing

/// Faults while real workers drain real jobs: SIGKILLed workers, a second SIGTERM, a store
/// that refuses writes, two hosts on one store — `halcyon work` processes where a worker must
/// die or be signalled, workers in this process otherwise. Afterwards nothing is lost, stuck or
/// corrupt.
/// HALCYON_CHAOS_JOBS / HALCYON_CHAOS_KILLS make the kill run longer (CI: 400 jobs, 3 kills).
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct ChaosTests {
    /// Small, so the debug build's resampler (unoptimised Swift) keeps up with the kills.
    static let photo: Data = try! SampleImages.photo(width: 320, height: 240, seed: 7)

    /// A worker on `db` in this process, once it is ready.
    func inProcessWorker(_ db: TestDatabase, store: URL, _ extra: [String] = []) async throws -> TestWorker {
        let w = try TestWorker(WorkerTests.workArguments(store: store) + extra, conninfo: db.conninfo)
        try await w.ready()
        return w
    }

    /// A `halcyon work` process on `db`, once it is ready: one to kill or to signal.
    func worker(_ db: TestDatabase, store: URL, _ extra: [String] = [], home: URL? = nil) async throws -> HalcyonProcess {
        let w = try HalcyonProcess(
            ["work", "--store", store.path, "--log-level", "info", "--allow-network", "127.0.0.1/32"] + extra,
            conninfo: db.conninfo, environment: home.map { ["HALCYON_HOME": $0.path] } ?? [:])
        try await w.ready()
        return w
    }

    func count(_ db: TestDatabase, _ whereClause: String) async throws -> Int {
        Int(try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE \(whereClause)").value(0, "n") ?? "") ?? -1
    }

    func enqueue(_ db: TestDatabase, _ n: Int, source: (Int) -> String, chain: String) async throws {
        let c = try await db.connect()
        defer { Task { await c.close() } }
        _ = try await JobQueue(connection: c).enqueue(
            batch: (0..<n).map { i in
                var j = JobQueue.NewJob(source: source(i))
                j.processors = chain
                return j
            })
    }

    /// Every succeeded job's `result_digest` is the SHA-256 of the bytes at its `result_path`,
    /// and nothing but objects, keys and the temp area is in the store.
    func expectStoreIntact(_ db: TestDatabase, store: URL) async throws {
        var checked = 0
        for row in try await db.query("SELECT DISTINCT result_digest, result_path FROM halcyon.jobs WHERE state = 'succeeded'").rows {
            let digest = try #require(row[0]), path = try #require(row[1])
            let data = try Data(contentsOf: store.appendingPathComponent(path))
            #expect(Digest.sha256Hex(data) == digest, "\(path) does not hash to its digest")
            checked += 1
        }
        #expect(checked > 0)
        let top = try FileManager.default.contentsOfDirectory(atPath: store.path).filter { !$0.hasPrefix(".") }
        #expect(Set(top).isSubset(of: ["objects", "keys", "tmp", "originals"]), "unexpected in the store: \(top)")
        // Temp files live only in tmp/: none beside a final object or key.
        let stray =
            FileManager.default.enumerator(atPath: store.path)?.compactMap { $0 as? String }
            .filter { !$0.hasPrefix("tmp/") && ($0.contains(".tmp") || $0.contains("~")) } ?? []
        #expect(stray.isEmpty, "temp files outside tmp/: \(stray.prefix(5))")
    }

    @Test(.processes(3)) func workersKilledAtRandomLoseNothing() async throws {
        let env = ProcessInfo.processInfo.environment
        let n = env["HALCYON_CHAOS_JOBS"].flatMap { Int($0) } ?? 400
        let kills = env["HALCYON_CHAOS_KILLS"].flatMap { Int($0) } ?? 3
        _ = try Origin.publish("chaos.jpg", Self.photo)
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        // A slow origin keeps jobs in flight long enough to be caught by a kill.
        try await enqueue(
            db, n, source: { "\(TestEnvironment.origin)/slowfile/0.2/chaos.jpg?t=\(db.name)&j=\($0)" },
            chain: "resize(100x100, mode=fill) |> format(jpeg, quality=80)")
        let args = [
            "--lease", "2s", "--concurrency", "2", "--fetch-concurrency", "4", "--log-level",
            ProcessInfo.processInfo.environment["HALCYON_CHAOS_LOG"] ?? "info",
        ]
        var workers: [HalcyonProcess] = []
        for _ in 0..<3 { workers.append(try await worker(db, store: store, args)) }
        var killedAt: [Date] = []
        var inFlightAtKill = 0
        for _ in 0..<kills {
            try await Task.sleep(for: .milliseconds(1500))
            let i = Int.random(in: 0..<workers.count)
            let victim = workers[i]
            // Kill it while it holds jobs (a loaded machine may start it slowly); what it holds
            // now is what may run twice.
            let holding = "state = 'running' AND locked_by LIKE '%-\(victim.pid)-%'"
            _ = try await waitUntil(120) {
                let held = try await count(db, holding), queued = try await count(db, "state = 'queued'")
                return held > 0 || queued == 0
            }
            inFlightAtKill += try await count(db, holding)
            victim.signal(SIGKILL)
            _ = await victim.wait(timeout: 5)
            killedAt.append(Date())
            workers[i] = try await worker(db, store: store, args)
        }
        let drained = try await waitUntil(180 + Double(n) / 10) { try await count(db, "state IN ('queued', 'running')") == 0 }
        if !drained {
            let activity = try await db.query(
                "SELECT pid, state, wait_event_type, wait_event, left(query, 80) FROM pg_stat_activity WHERE datname = current_database()"
            ).rows
            Issue.record("not drained; sessions: \(activity); workers: \(workers.map { "\($0.pid): \($0.output.suffix(800))" })")
        }
        for w in workers {
            w.signal(SIGTERM)
            #expect(await w.wait(timeout: 30) == 0, "\(w.output.suffix(1500))")
        }
        let left = try await db.query(
            """
            SELECT state::text, attempt, round(extract(epoch FROM run_at - now())) AS run_in, locked_by, left(last_error, 120) AS error, count(*) AS n
            FROM halcyon.jobs WHERE state <> 'succeeded' GROUP BY 1, 2, 3, 4, 5 ORDER BY n DESC LIMIT 10
            """
        ).rows
        #expect(drained, "jobs left: \(left)")
        let succeeded = try await count(db, "state = 'succeeded'")
        let stuck = try await count(db, "state = 'running'")
        let retried = try await count(db, "attempt > 1")
        let retriedWithoutKill = try await count(db, "attempt > 1 AND NOT errors @> '[{\"code\": \"worker.lease_expired\"}]'")
        // Rescue time: from each kill to the first lease_expired entry written after it.
        let rescues = try await db.query(
            """
            SELECT DISTINCT extract(epoch FROM (e->>'at')::timestamptz)::float8 AS at
            FROM halcyon.jobs, jsonb_array_elements(errors) e WHERE e->>'code' = 'worker.lease_expired'
            """
        ).rows.compactMap { $0[0].flatMap { Double($0) } }.sorted()
        let delays = killedAt.compactMap { k in rescues.first { $0 >= k.timeIntervalSince1970 }.map { $0 - k.timeIntervalSince1970 } }
        print(
            String(
                format:
                    "chaos: %d jobs, %d SIGKILLs: succeeded %d, lost %d, stuck %d, ran twice %d (in flight at the kills: %d); rescue after a kill (lease 2 s): max %.1f s",
                n, kills, succeeded, n - succeeded, stuck, retried, inFlightAtKill, delays.max() ?? -1))
        #expect(succeeded == n)
        #expect(stuck == 0)
        #expect(inFlightAtKill > 0, "no kill caught a worker holding jobs: nothing was rescued")
        #expect(retriedWithoutKill == 0, "jobs retried for something other than a killed worker")
        #expect(retried <= inFlightAtKill + 6 * kills, "more jobs ran twice than the killed workers held")
        try await expectStoreIntact(db, store: store)
    }

    @Test(.processes(2)) func workersRideOutDatabaseRestartsAndKilledConnections() async throws {
        _ = try Origin.publish("chaos.jpg", Self.photo)
        // A cluster of its own: restarting the shared test cluster would disturb other suites.
        let cluster = EmbeddedCluster(home: try TestEnvironment.temporaryDirectory("restart"))
        try await cluster.started()
        defer { try? cluster.stop(mode: "immediate") }
        let conninfo = cluster.conninfo
        let migrate = try HalcyonProcess(["migrate"], conninfo: conninfo)
        #expect(await migrate.wait(timeout: 180) == 0, "\(migrate.output)")
        // Each phase gets jobs of its own, so that its "progress before the fault" is there to be
        // seen however fast the workers drained the previous phase's.
        let perPhase = 100, n = 3 * perPhase
        func enqueuePhase(_ phase: Int) async throws {
            let c = try await PGConnection.connect(conninfo)
            defer { Task { await c.close() } }
            _ = try await JobQueue(connection: c).enqueue(
                batch: (0..<perPhase).map { i in
                    var j = JobQueue.NewJob(
                        source: "\(TestEnvironment.origin)/slowfile/0.1/chaos.jpg?t=restart-\(UUID().uuidString.prefix(6))&p=\(phase)&j=\(i)")
                    j.processors = "resize(100x100) |> format(png)"
                    return j
                })
        }
        try await enqueuePhase(0)
        var c: PGConnection
        let store = try TestEnvironment.temporaryDirectory("store")
        let workers = try (0..<2).map { _ in
            try HalcyonProcess(
                ["work", "--store", store.path, "--allow-network", "127.0.0.1/32", "--log-level", "info", "--concurrency", "2"],
                conninfo: conninfo)
        }
        func succeeded() async -> Int {
            guard let c = try? await PGConnection.connect(conninfo) else { return -1 }
            defer { Task { await c.close() } }
            return (try? await c.execute("SELECT count(*) AS n FROM halcyon.jobs WHERE state = 'succeeded'").value(0, "n")).flatMap {
                $0.flatMap { Int($0) }
            } ?? -1
        }
        var progress: [Int] = []
        for (phase, mode) in ["fast", "immediate", "terminate"].enumerated() {
            if phase > 0 { try await enqueuePhase(phase) }
            let before = await succeeded()
            #expect(try await waitUntil(60) { await succeeded() > before + 20 }, "no progress before the \(mode) fault")
            if mode == "terminate" {
                c = try await PGConnection.connect(conninfo)
                try await c.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND datname = current_database()")
                await c.close()
            } else {
                try await cluster.stopped(mode: mode)
                try await Task.sleep(for: .seconds(2))
                try await cluster.started()
            }
            progress.append(await succeeded())
        }
        let drained = try await waitUntil(180) {
            guard let c = try? await PGConnection.connect(conninfo) else { return false }
            defer { Task { await c.close() } }
            return (try? await c.execute("SELECT count(*) AS n FROM halcyon.jobs WHERE state IN ('queued', 'running')").value(0, "n")) == "0"
        }
        for w in workers {
            #expect(w.isRunning, "a worker exited on a database fault: \(w.output.suffix(1500))")
            w.signal(SIGTERM)
            #expect(await w.wait(timeout: 30) == 0, "\(w.output.suffix(1500))")
        }
        #expect(drained)
        c = try await PGConnection.connect(conninfo)
        let rows = try await c.execute(
            "SELECT count(*) FILTER (WHERE state = 'succeeded') AS ok, count(*) FILTER (WHERE state = 'running') AS stuck FROM halcyon.jobs")
        await c.close()
        print(
            "database faults: succeeded after fast restart / immediate restart / terminate: \(progress); final \(rows.value(0, "ok") ?? "?") of \(n)")
        #expect(rows.value(0, "ok") == String(n))
        #expect(rows.value(0, "stuck") == "0")
    }

    @Test func aLongLockOnJobRowsDelaysOnlyThoseJobs() async throws {
        _ = try Origin.publish("chaos.jpg", Self.photo)
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        try await enqueue(db, 30, source: { "\(TestEnvironment.origin)/files/chaos.jpg?t=\(db.name)&j=\($0)" }, chain: "resize(50x50) |> format(png)")
        // Another session holds two queued rows for 4 s: workers skip them and drain the rest.
        let holder = try await db.connect()
        try await holder.execute("BEGIN")
        try await holder.execute("SELECT id FROM halcyon.jobs ORDER BY id LIMIT 2 FOR UPDATE")
        let w = try await inProcessWorker(db, store: store, ["--poll-interval", "200ms"])
        // However slowly a busy machine drains them, the 28 unlocked jobs finish while the lock is held.
        let drained = try await waitForProgress(stall: 60) {
            try await count(db, "state = 'succeeded'")
        } until: {
            $0 == 28
        }
        #expect(drained, "\(w.output.suffix(2000))")
        #expect(try await count(db, "state = 'queued'") == 2, "the locked rows were not skipped")
        try await Task.sleep(for: .seconds(1))
        try await holder.execute("COMMIT")
        await holder.close()
        #expect(try await waitUntil(120) { try await count(db, "state = 'succeeded'") == 30 })
        #expect(w.isRunning)
        w.signal(SIGTERM)
        #expect(await w.wait(timeout: 30) == 0)
    }

    /// A job that fails and is due again at once can be claimed again by the same worker
    /// before the failed attempt has finished its bookkeeping. The old attempt must not drop
    /// the new one: it used to, and the new attempt then ran unheld — no lease renewals, its
    /// outcome discarded — until its lease ended and it was rescued (seen as a flaky demo on a
    /// loaded machine). The race is timing-dependent; `HeldJobsTests` pins the rule itself and
    /// this drives many immediate re-claims end to end (HALCYON_CHAOS_RECLAIMS for more).
    @Test func aJobClaimedAgainAtOnceBySameWorkerIsStillHeld() async throws {
        _ = try Origin.publish("chaos.jpg", Self.photo)
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let n = Int(ProcessInfo.processInfo.environment["HALCYON_CHAOS_RECLAIMS"] ?? "") ?? 80
        // Each job's first three requests answer 503; no retry inside the fetch, no backoff.
        try await enqueue(db, n, source: { "\(TestEnvironment.origin)/fail/3/503/\(db.name)-\($0)/chaos.jpg" }, chain: "")
        let w = try await inProcessWorker(
            db, store: store,
            [
                "--drain", "--retry-base", "0s", "--fetch-retries", "0", "--lease", "5s",
                "--concurrency", "2", "--fetch-concurrency", "8", "--no-progress",
            ])
        #expect(await w.wait(timeout: 120) == 0, "\(w.output.suffix(1500))")
        #expect(try await count(db, "state = 'succeeded' AND attempt = 4") == n)
        #expect(try await count(db, "errors @> '[{\"code\": \"worker.lease_expired\"}]'") == 0, "attempts dropped and rescued")
        #expect(!w.output.contains("rescued jobs whose lease ended"))
    }

    /// A SIGTERM the moment the worker is up (as `docker stop` right after `docker start`)
    /// stops it: libdispatch's signal sources used to swallow early signals.
    @Test(arguments: 0..<3)
    func aSIGTERMRightAfterStartStopsTheWorker(round: Int) async throws {
        let db = try await TestDatabase.create()
        let w = try await worker(db, store: try TestEnvironment.temporaryDirectory("store"))
        #expect(try await waitUntil(120) { w.output.contains("worker started") })
        w.signal(SIGTERM)
        #expect(await w.wait(timeout: 15) == 0, "\(w.output.suffix(1500))")
        #expect(w.output.contains("stop requested"))
    }

    @Test func aSecondSignalStopsAtOnceAndReleasesWithoutSpendingAttempts() async throws {
        _ = try Origin.publish("chaos.jpg", Self.photo)
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        try await enqueue(db, 40, source: { "\(TestEnvironment.origin)/slowfile/30/chaos.jpg?t=\(db.name)&j=\($0)" }, chain: "")
        let w = try await worker(db, store: store, ["--grace", "60s", "--concurrency", "2", "--fetch-concurrency", "4"])
        #expect(try await waitUntil(60) { try await count(db, "state = 'running'") > 0 })
        w.signal(SIGTERM)
        // Two SIGTERMs pending at once are one signal to the kernel: the second comes later.
        try await Task.sleep(for: .milliseconds(500))
        #expect(w.isRunning, "the first signal waits for the grace period")
        let second = ContinuousClock.now
        w.signal(SIGTERM)
        // Waited for past the 60 s grace, so that a worker ignoring the second signal is seen
        // as one, not killed by the wait.
        let status = await w.wait(timeout: 90)
        let took = ContinuousClock.now - second
        #expect(status == 0, "\(w.output.suffix(1500))")
        // The release is at once and the last bookkeeping 3 s at most: under 2 s idle; 5.5 s has
        // been seen under the full suite on 2 cores (a debug build); the process ends itself 10 s after
        // the second signal at the latest. Hence 20 s, far from the grace.
        print("second signal: exited \(took) after it")
        #expect(took < .seconds(20), "exited \(took) after the second signal (60 s grace)")
        #expect(try await count(db, "state = 'running'") == 0)
        #expect(try await count(db, "state = 'queued' AND attempt = 0 AND errors = '[]'") == 40)
    }

    @Test func aStoreThatRefusesWritesFailsJobsCleanlyAndTheWorkerSurvives() async throws {
        _ = try Origin.publish("chaos.jpg", Self.photo)
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        // Every file the worker writes is capped at 1 KiB (RLIMIT_FSIZE, inherited): results fail
        // with EFBIG, as on a full disk, and must leave nothing at a final path.
        try await enqueue(
            db, 6, source: { "\(TestEnvironment.origin)/files/chaos.jpg?t=\(db.name)&j=\($0)" },
            chain: "resize(300x300) |> format(png)")
        let w = try HalcyonProcess(
            [
                "-c", "ulimit -f 1; exec \"$0\" \"$@\"", TestEnvironment.binary, "work", "--store", store.path,
                "--allow-network", "127.0.0.1/32", "--log-level", "info", "--database-url", db.conninfo,
            ],
            conninfo: nil, executable: "/bin/sh")
        let failedWrites = "errors @> '[{\"code\": \"store.write_failed\"}]'"
        let refused = try await waitUntil(60) { try await count(db, failedWrites) == 6 }
        let rows = try await db.query("SELECT id, state::text, attempt, last_error FROM halcyon.jobs").rows
        #expect(refused, "\(rows)")
        // The worker survives (its own log is over the limit too: lines are lost, not the process).
        #expect(w.isRunning, "the worker must survive a failing store")
        w.signal(SIGTERM)
        #expect(await w.wait(timeout: 30) == 0)
        // Retried later (transient), none stuck, no other error, nothing partial published.
        #expect(try await count(db, "state IN ('queued', 'failed') AND \(failedWrites)") == 6)
        #expect(try await count(db, "EXISTS (SELECT 1 FROM jsonb_array_elements(errors) e WHERE e->>'code' <> 'store.write_failed')") == 0)
        let objects =
            FileManager.default.enumerator(atPath: store.appendingPathComponent("objects").path)?.compactMap { $0 as? String }
            .filter { $0.hasSuffix(".png") } ?? []
        #expect(objects.isEmpty, "partial objects published: \(objects)")
        // Each refused write removed its temp file (the sweep would only remove them a day later).
        let temps = (try? FileManager.default.contentsOfDirectory(atPath: store.appendingPathComponent("tmp").path)) ?? []
        #expect(temps.isEmpty, "temp files left by refused writes: \(temps)")
        // The same jobs succeed once the store takes writes again.
        try await db.query("UPDATE halcyon.jobs SET run_at = now(), state = 'queued', finished_at = NULL WHERE state IN ('queued', 'failed')")
        let healthy = try await inProcessWorker(db, store: store, ["--drain"])
        #expect(await healthy.wait(timeout: 180) == 0, "\(healthy.output.suffix(1500))")
        #expect(try await count(db, "state = 'succeeded'") == 6)
        try await expectStoreIntact(db, store: store)
    }

    @Test(.processes(2)) func twoHostsShareOneStoreAndOneDatabase() async throws {
        _ = try Origin.publish("chaos.jpg", Self.photo)
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        // 60 jobs over 20 distinct results: each result is wanted three times, racing across hosts.
        try await enqueue(
            db, 60, source: { "\(TestEnvironment.origin)/files/chaos.jpg?t=\(db.name)&k=\($0 % 20)" },
            chain: "resize(120x120, mode=fill) |> format(webp)")
        let hosts = try (0..<2).map { try TestEnvironment.temporaryDirectory("host\($0)") }
        var workers: [HalcyonProcess] = []
        for (i, home) in hosts.enumerated() {
            for _ in 0..<2 {
                workers.append(
                    try await worker(
                        db, store: store, ["--drain", "--concurrency", "2"] + (i == 1 ? ["--poll-only", "--poll-interval", "200ms"] : []),
                        home: home))
            }
        }
        for w in workers { #expect(await w.wait(timeout: 120) == 0, "\(w.output.suffix(1500))") }
        #expect(try await count(db, "state = 'succeeded'") == 60)
        // 20 result keys, each a key file; one object, since every result has the same bytes
        // (content addressing: the same image behind 20 URLs is stored once).
        #expect(try await db.query("SELECT count(DISTINCT result_key) AS n FROM halcyon.jobs").value(0, "n") == "20")
        #expect(try await db.query("SELECT count(DISTINCT result_path) AS n FROM halcyon.jobs").value(0, "n") == "1")
        func files(_ dir: String) -> [String] {
            FileManager.default.enumerator(atPath: store.appendingPathComponent(dir).path)?.compactMap { $0 as? String }
                .filter {
                    !$0.hasSuffix("/")
                        && ((try? FileManager.default.attributesOfItem(atPath: store.appendingPathComponent(dir).appendingPathComponent($0).path)[
                            .type]) as? FileAttributeType) == .typeRegular
                } ?? []
        }
        #expect(files("objects").count == 1, "duplicate objects: \(files("objects"))")
        #expect(files("keys").count == 20)
        #expect(try await count(db, "attempt <> 1") == 0)
        try await expectStoreIntact(db, store: store)
    }
}
