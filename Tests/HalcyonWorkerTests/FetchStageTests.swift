import Foundation
import HalcyonQueue
import HalcyonTestSupport
import Testing

/// The fetch stage as a worker runs it: retries, per-job retry options, coalescing, the guard.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .workers)
struct FetchStageTests {
    let helper = WorkerTests()

    @Test func twoServerErrorsThenSuccessLeavesNoErrors() async throws {
        _ = try WorkerTests.published()
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let path = "/fail/2/500/\(db.name)/tiny.png"
        _ = try await helper.enqueue(db, [helper.job(TestEnvironment.origin + path, "resize(4x4)")])
        let w = try await helper.worker(db, store: store, ["--drain", "--fetch-retry-interval", "50ms"])
        #expect(await w.wait(timeout: 180) == 0)
        let r = try await db.query("SELECT state::text, attempt, errors::text FROM halcyon.jobs")
        #expect(r.value(0, "state") == "succeeded")
        #expect(r.value(0, "attempt") == "1")
        #expect(r.value(0, "errors") == "[]")
        #expect(try Origin.counts()[path] == 3)
    }

    @Test func jobRetryOptionsOverrideTheWorkers() async throws {
        _ = try WorkerTests.published()
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let path = "/fail/1/503/\(db.name)/tiny.png"
        var job = helper.job(TestEnvironment.origin + path)
        job.options = #"{"retry": {"max": 0}}"#
        _ = try await helper.enqueue(db, [job])
        let w = try await helper.worker(db, store: store, ["--drain", "--fetch-retries", "5"])
        #expect(await w.wait(timeout: 180) == 0)
        // No download retry: the job itself is scheduled again with backoff.
        let r = try await db.query("SELECT state::text, attempt, last_error FROM halcyon.jobs")
        #expect(r.value(0, "state") == "queued")
        #expect(r.value(0, "last_error")?.hasPrefix("fetch.http_status: HTTP 503") == true)
        #expect(try Origin.counts()[path] == 1)
    }

    @Test func twentyConcurrentJobsOnOneURLMakeOneRequest() async throws {
        _ = try WorkerTests.published()
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let path = "/slowfile/2/photo.jpg?t=\(db.name)"
        let chains = (0..<20).map { "resize(\(20 + $0 * 10)x\(20 + $0 * 10), mode=fill) |> format(png)" }
        _ = try await helper.enqueue(db, chains.map { helper.job(TestEnvironment.origin + path, $0) })
        let w = try await helper.worker(db, store: store, ["--drain", "--fetch-concurrency", "32"])
        #expect(await w.wait(timeout: 180) == 0, "\(w.output.suffix(1000))")
        #expect(try await helper.count(db, "state = 'succeeded'") == 20)
        #expect(try await db.query("SELECT count(DISTINCT result_digest) AS n FROM halcyon.jobs").value(0, "n") == "20")
        #expect(try Origin.counts()[path] == 1)
    }

    @Test func blockedAddressesFailPermanentlyWithoutARequest() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let port = TestEnvironment.origin.split(separator: ":").last!
        _ = try await helper.enqueue(
            db,
            [
                helper.job("http://127.0.0.2:\(port)/files/tiny.png"),  // loopback, but only 127.0.0.1 is allowed
                helper.job("\(TestEnvironment.origin)/redirect?to=http://127.0.0.3:\(port)/files/tiny.png&t=\(db.name)"),
            ])
        let w = try await helper.worker(db, store: store, ["--drain"])
        #expect(await w.wait(timeout: 180) == 0)
        let r = try await db.query("SELECT state::text, attempt, last_error FROM halcyon.jobs ORDER BY id")
        for i in 0..<2 {
            #expect(r.value(i, "state") == "failed")
            #expect(r.value(i, "attempt") == "1")
            #expect(r.value(i, "last_error")?.hasPrefix("fetch.blocked_address: refused to connect: 127.0.0.") == true)
        }
    }

    /// A worker fetching from the origin over `[::1]`: refused as loopback without an
    /// allowance (the suite's `--allow-network 127.0.0.1/32` is IPv4's loopback only), fetched
    /// with `--allow-network ::1/128`.
    @Test(.enabled(if: TestEnvironment.ipv6Loopback, "needs IPv6 loopback"))
    func ipv6LoopbackIsRefusedUnlessAllowed() async throws {
        _ = try WorkerTests.published()
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let refusedPath = "/files/tiny.png?v6=refused-\(db.name)", allowedPath = "/files/tiny.png?v6=allowed-\(db.name)"
        let refused = try await helper.enqueue(db, [helper.job(TestEnvironment.originIPv6 + refusedPath)])[0]
        let w1 = try await helper.worker(db, store: store, ["--drain"])
        #expect(await w1.wait(timeout: 180) == 0, "\(w1.output.suffix(2000))")
        let allowed = try await helper.enqueue(db, [helper.job(TestEnvironment.originIPv6 + allowedPath, "resize(4x4)")])[0]
        let w2 = try await helper.worker(db, store: store, ["--drain", "--allow-network", "::1/128"])
        #expect(await w2.wait(timeout: 180) == 0, "\(w2.output.suffix(2000))")
        let r = try await db.query("SELECT id, state::text, attempt, last_error, result_width FROM halcyon.jobs ORDER BY id")
        #expect(r.value(0, "id") == String(refused) && r.value(1, "id") == String(allowed))
        #expect(r.value(0, "state") == "failed" && r.value(0, "attempt") == "1")
        #expect(
            r.value(0, "last_error") == "fetch.blocked_address: refused to connect: ::1 is loopback (::1/128); allow it with --allow-network",
            "\(r.dictionaries)")
        #expect(r.value(1, "state") == "succeeded" && r.value(1, "result_width") == "4", "\(r.dictionaries)")
        let counts = try Origin.counts()
        #expect(counts[refusedPath] == nil, "the refused job reached the origin")
        #expect(counts[allowedPath] == 1)
    }

    @Test func originalsTTLReusesADownloadAcrossRuns() async throws {
        _ = try WorkerTests.published()
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let path = "/files/photo.jpg?t=\(db.name)"
        for chain in ["resize(30x30)", "resize(40x40)"] {
            _ = try await helper.enqueue(db, [helper.job(TestEnvironment.origin + path, chain)])
            let w = try await helper.worker(db, store: store, ["--drain", "--originals-ttl", "1h"])
            #expect(await w.wait(timeout: 180) == 0)
        }
        #expect(try await helper.count(db, "state = 'succeeded'") == 2)
        #expect(try Origin.counts()[path] == 1)
    }

    @Test func aBatchSharingASourceRunsEachChainAndJudgesEachJob() async throws {
        _ = try WorkerTests.published()
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let url = "\(TestEnvironment.origin)/files/photo.jpg?t=\(db.name)"
        let ids = try await helper.enqueue(
            db,
            [
                helper.job(url, "resize(320x320, mode=fill) |> format(jpeg, quality=82)"),
                helper.job(url, "resize(200x200) |> format(webp, quality=80)"),
                helper.job(url, "resize(64x64, mode=fill) |> format(png)"),
                helper.job(url, "resize(64x64, mode=fil)"),
            ])
        let w = try await helper.worker(db, store: store, ["--drain"])
        #expect(await w.wait(timeout: 180) == 0)
        let r = try await db.query("SELECT id, state::text, result_width, result_height, result_format, last_error FROM halcyon.jobs ORDER BY id")
        #expect((0..<3).map { r.value($0, "state") } == ["succeeded", "succeeded", "succeeded"])
        #expect((0..<3).map { "\(r.value($0, "result_width") ?? "")x\(r.value($0, "result_height") ?? "")" } == ["320x320", "200x150", "64x64"])
        #expect((0..<3).map { r.value($0, "result_format") } == ["jpeg", "webp", "png"])
        #expect(r.value(3, "state") == "failed")
        #expect(r.value(3, "last_error")?.hasPrefix("job.invalid_chain") == true)
        #expect(r.value(0, "id") == String(ids[0]))
        #expect(try Origin.counts()["/files/photo.jpg?t=\(db.name)"] == 1)
    }
}
