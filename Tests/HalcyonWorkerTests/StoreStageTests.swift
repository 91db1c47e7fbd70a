import Foundation
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import HalcyonStore
import HalcyonTestSupport
import Testing

/// The store as a worker uses it: hits before any download, `force_refresh`,
/// `only_from_cache`, expiry options; and the `sweep` and `verify` commands.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct StoreStageTests {
    let helper = WorkerTests()

    /// A URL of its own per test, so the origin's request counts are this test's alone.
    func source(_ db: TestDatabase) throws -> (url: String, path: String) {
        _ = try WorkerTests.published()
        let path = "/files/photo.jpg?t=\(db.name)"
        return (TestEnvironment.origin + path, path)
    }

    func drain(_ db: TestDatabase, _ store: URL, _ extra: [String] = []) async throws {
        let w = try await helper.worker(db, store: store, ["--drain"] + extra)
        #expect(await w.wait(timeout: 180) == 0, "\(w.output.suffix(1000))")
    }

    @Test func aSecondJobForTheSameSourceAndChainIsAHitWithoutARequest() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let (url, path) = try source(db)
        _ = try await helper.enqueue(db, [helper.job(url, "resize(100x100, mode=fill) |> format(png)")])
        try await drain(db, store)
        // An equivalent spelling of the chain: the same identifier, the same key.
        _ = try await helper.enqueue(db, [helper.job(url, "RESIZE(100x100, mode=fill) >> format(png)")])
        try await drain(db, store)
        let r = try await db.query(
            """
            SELECT cache_hit, result_key, result_path, result_digest, result_bytes, result_width, result_height, result_format, result_source
            FROM halcyon.jobs ORDER BY id
            """)
        #expect(r.value(0, "cache_hit") == "f" && r.value(1, "cache_hit") == "t")
        for column in ["result_key", "result_path", "result_digest", "result_bytes", "result_width", "result_height", "result_format"] {
            #expect(r.value(1, column) == r.value(0, column), "\(column)")
        }
        #expect(r.value(1, "result_width") == "100" && r.value(1, "result_format") == "png")
        #expect(r.value(1, "result_source") == nil)
        #expect(try Origin.counts()[path] == 1)
        #expect(FileManager.default.fileExists(atPath: store.appendingPathComponent(try #require(r.value(1, "result_path"))).path))
    }

    /// Once nearly every job is a hit, one claim takes many (`--hit-claim-batch`); jobs of one
    /// claim share their `started_at` (one statement's now()).
    @Test(arguments: [(250, true), (1, false)])
    func hitHeavyQueuesAreClaimedInLargeBatches(batch: Int, large: Bool) async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let (url, _) = try source(db)
        let chain = "resize(40x40) |> format(png)"
        _ = try await helper.enqueue(db, [helper.job(url, chain)])
        try await drain(db, store)
        _ = try await helper.enqueue(db, (0..<600).map { _ in helper.job(url, chain) })
        try await drain(db, store, ["--concurrency", "2", "--fetch-concurrency", "2", "--hit-claim-batch", String(batch)])
        #expect(try await helper.count(db, "cache_hit") == 600)
        let largest =
            try await db.query("SELECT max(n) AS n FROM (SELECT count(*) AS n FROM halcyon.jobs WHERE cache_hit GROUP BY started_at) c")
            .value(0, "n").flatMap { Int($0) } ?? 0
        if large {
            #expect(largest > 4, "largest claim \(largest): claims stayed at concurrency + fetch-concurrency")
            #expect(largest <= batch)
        } else {
            // concurrency + fetch-concurrency, and a claim's siblings (the same source, enqueued after).
            #expect(largest <= 4 + 16, "largest claim \(largest) with the larger claims off")
        }
    }

    @Test func forceRefreshFetchesAgainAndOnlyFromCacheFailsAMiss() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let (url, path) = try source(db)
        _ = try await helper.enqueue(db, [helper.job(url, "resize(50x50)")])
        try await drain(db, store)
        var refresh = helper.job(url, "resize(50x50)")
        refresh.options = #"{"force_refresh": true}"#
        var cached = helper.job(url, "resize(50x50)")
        // `score` is no part of the key: still a hit.
        cached.options = #"{"only_from_cache": true, "score": true}"#
        var uncached = helper.job(url, "resize(51x51)")
        uncached.options = #"{"only_from_cache": true}"#
        _ = try await helper.enqueue(db, [refresh, cached, uncached])
        try await drain(db, store)
        let r = try await db.query("SELECT state::text, cache_hit, attempt, last_error, result_quality FROM halcyon.jobs ORDER BY id")
        #expect(r.value(1, "state") == "succeeded" && r.value(1, "cache_hit") == "f")
        #expect(r.value(2, "state") == "succeeded" && r.value(2, "cache_hit") == "t")
        // A JPEG kept as JPEG is written at the default quality, and a hit reports it.
        #expect((0...2).map { r.value($0, "result_quality") } == ["85", "85", "85"])
        #expect(r.value(3, "state") == "failed" && r.value(3, "attempt") == "1")  // permanent: no retry
        #expect(r.value(3, "last_error")?.hasPrefix("store.not_cached:") == true)
        #expect(try Origin.counts()[path] == 2)
    }

    @Test func expirationOptionsReachTheFiles() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let (url, _) = try source(db)
        var hour = helper.job(url, "resize(40x40)")
        hour.options = #"{"expiration": "1h"}"#
        var never = helper.job(url, "resize(41x41)")
        never.options = #"{"expiration": "never"}"#
        var expired = helper.job(url, "resize(42x42)")
        expired.options = #"{"expiration": "expired"}"#
        _ = try await helper.enqueue(db, [hour, never, expired])
        let started = Date()
        try await drain(db, store)
        let finished = Date()
        let r = try await db.query("SELECT result_key, result_path FROM halcyon.jobs ORDER BY id")
        func times(_ row: Int) throws -> (key: FileTimes, object: FileTimes) {
            let resultKey = try #require(r.value(row, "result_key")), resultPath = try #require(r.value(row, "result_path"))
            let key = try #require(FileTimes.read(store.appendingPathComponent(StoreLayout.keyPath(for: resultKey)).path))
            let object = try #require(FileTimes.read(store.appendingPathComponent(resultPath).path))
            return (key, object)
        }
        let h = try times(0)
        // An hour from when the job ran: between the drain's start and end (a loaded machine
        // may take a while), to the second the file system keeps.
        let window = (started + 3600 - 1)...(finished + 3600 + 1)
        #expect(window.contains(h.key.expires), "\(h.key.expires) not in \(window)")
        #expect(window.contains(h.object.expires), "\(h.object.expires) not in \(window)")
        #expect(try times(1).object.expires == StorageExpiration.neverInstant)
        #expect(try times(2).object.expires <= Date())
        // The next sweep removes the `expired` result and nothing else.
        let sweep = try HalcyonProcess(["sweep", "--store", store.path, "--json"], conninfo: db.conninfo)
        #expect(await sweep.wait(timeout: 180) == 0)
        let report = try #require(JSONValue.parse(sweep.output), "\(sweep.output)")
        #expect(report["expired_objects"]?.numberValue == 1)
        #expect(report["kept_files"]?.numberValue == 2)
        #expect(!FileManager.default.fileExists(atPath: store.appendingPathComponent(try #require(r.value(2, "result_path"))).path))
        #expect(FileManager.default.fileExists(atPath: store.appendingPathComponent(try #require(r.value(0, "result_path"))).path))
    }

    @Test func verifyReportsAndRepairsCorruptObjects() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let (url, _) = try source(db)
        _ = try await helper.enqueue(db, [helper.job(url, "resize(30x30) |> format(png)"), helper.job(url, "resize(31x31) |> format(png)")])
        try await drain(db, store)
        let clean = try HalcyonProcess(["verify", "--store", store.path], conninfo: nil)
        #expect(await clean.wait(timeout: 180) == 0, "\(clean.output)")
        #expect(clean.output.contains("checked 2 objects"))
        let bad = try #require(try await db.query("SELECT result_path FROM halcyon.jobs ORDER BY id").value(0, "result_path"))
        try Data("not the bytes it was".utf8).write(to: store.appendingPathComponent(bad))
        let found = try HalcyonProcess(["verify", "--store", store.path], conninfo: nil)
        #expect(await found.wait(timeout: 180) == 1)
        #expect(found.output.contains("corrupt: \(bad)"))
        let repair = try HalcyonProcess(["verify", "--store", store.path, "--repair"], conninfo: nil)
        #expect(await repair.wait(timeout: 180) == 1)
        #expect(repair.output.contains("removed 1 corrupt objects and 1 keys"), "\(repair.output)")
        #expect(!FileManager.default.fileExists(atPath: store.appendingPathComponent(bad).path))
    }

    @Test func workersSweepPeriodicallyAndSweepsTakeTurnsOnTheLease() async throws {
        let db = try await TestDatabase.create()
        let store = DiskStore(root: try TestEnvironment.temporaryDirectory("store"))
        let info = ResultInfo(format: "png", width: 1, height: 1)
        let stale = try await store.store(
            Data("stale".utf8), ext: "png", info: info, key: "stale", expiration: .seconds(1),
            now: Date(timeIntervalSinceNow: -60))
        let fresh = try await store.store(Data("fresh".utf8), ext: "png", info: info, key: "fresh", expiration: .days(1))

        // Someone else holds the sweep lease: `halcyon sweep` waits for it.
        try await db.query(
            "INSERT INTO halcyon.leases (name, holder, expires_at) VALUES ('store_sweep', 'another sweeper', now() + interval '10 minutes')")
        let sweep = try HalcyonProcess(["sweep", "--store", store.root.path], conninfo: db.conninfo)
        #expect(try await waitUntil(120) { sweep.output.contains("another sweep is running") }, "\(sweep.output)")
        try await Task.sleep(for: .seconds(2))
        #expect(sweep.isRunning)
        #expect(FileManager.default.fileExists(atPath: store.url(forRelativePath: stale.path).path))
        try await db.query("DELETE FROM halcyon.leases WHERE holder = 'another sweeper'")
        #expect(await sweep.wait(timeout: 30) == 0)
        #expect(!FileManager.default.fileExists(atPath: store.url(forRelativePath: stale.path).path))
        // It gave the lease up when it finished.
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.leases").value(0, "n") == "0")

        // A lease whose holder died lapses: the next sweep takes it without waiting.
        try await db.query(
            "INSERT INTO halcyon.leases (name, holder, expires_at) VALUES ('store_sweep', 'a dead sweeper', now() - interval '1 second')")
        let next = try HalcyonProcess(["sweep", "--store", store.root.path], conninfo: db.conninfo)
        #expect(await next.wait(timeout: 30) == 0)
        #expect(!next.output.contains("another sweep is running"), "\(next.output)")

        // A worker sweeps on its own.
        let again = try await store.store(
            Data("again".utf8), ext: "png", info: info, key: "again", expiration: .seconds(1),
            now: Date(timeIntervalSinceNow: -60))
        let w = try await helper.worker(db, store: store.root, ["--sweep-interval", "1s", "--log-level", "info"])
        // From the moment it is ready: a sweep within a few intervals (the bound is generous).
        #expect(try await waitUntil(120) { !FileManager.default.fileExists(atPath: store.url(forRelativePath: again.path).path) })
        w.signal(SIGTERM)
        #expect(await w.wait(timeout: 30) == 0)
        #expect(!FileManager.default.fileExists(atPath: store.url(forRelativePath: again.path).path))
        #expect(FileManager.default.fileExists(atPath: store.url(forRelativePath: fresh.path).path))
        #expect(w.output.contains("store swept"), "\(w.output.suffix(2000))")
    }
}
