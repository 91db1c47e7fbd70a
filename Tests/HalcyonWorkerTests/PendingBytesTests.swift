import Foundation
import HalcyonFetch
import HalcyonImage
import HalcyonQueue
import HalcyonSamples
import HalcyonTestSupport
import HalcyonWorker
import Testing

/// Downloaded sources waiting for a processing slot are bounded in bytes, so a worker that
/// claimed many jobs does not hold every body in memory at once.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct PendingBytesTests {
    /// A JPEG padded with comment segments to about `megabytes` MB: a big download, a cheap decode.
    static func paddedJPEG(megabytes: Int) throws -> Data {
        let jpeg = try SampleImages.photo(width: 800, height: 600, seed: 41)
        var padding = Data()
        for _ in 0..<(megabytes * 16) {
            padding += Data([0xFF, 0xFE, 0xFF, 0xFF]) + Data(repeating: 0x20, count: 65_533)
        }
        return jpeg.prefix(2) + padding + jpeg.dropFirst(2)
    }

    /// In store-hit mode a worker claims up to 250 jobs per round trip. When they turn out to be
    /// misses, they used to download all at once and wait in memory for the one processing slot.
    /// Now a download starts only while less than --max-pending-bytes is waiting.
    @Test func downloadsWaitWhileTooManyBytesWaitForASlot() async throws {
        let db = try await TestDatabase.create()
        let tiny = try Origin.publish("pending-tiny.png", try SampleImages.solid(width: 8, height: 8, red: 5, green: 6, blue: 7))
        _ = try Origin.publish("pending-big.jpg", try Self.paddedJPEG(megabytes: 2))
        // Phase 1: one miss, then 40 store hits, which put the worker in store-hit mode (claims of
        // up to 250). Each hit has a source of its own: jobs of one source would be claimed and
        // run together as siblings of one decode, which are not store hits.
        let w = try TestWorker(
            [
                "work", "--store", try TestEnvironment.temporaryDirectory("store").path, "--allow-network", "127.0.0.1/32",
                "--concurrency", "1", "--fetch-concurrency", "4", "--max-pending-bytes", "1MiB", "--log-level", "info",
            ],
            conninfo: db.conninfo)
        _ = try await db.query("SELECT halcyon.enqueue($1, processors => 'format(png)', cache_key => 'pending-hit')", [tiny])
        #expect(
            try await waitUntil(60) { try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE state = 'succeeded'").value(0, "n") == "1" })
        _ = try await db.query(
            "SELECT halcyon.enqueue($1 || '?hit=' || g, processors => 'format(png)', cache_key => 'pending-hit') FROM generate_series(1, 40) AS g",
            [tiny])
        #expect(
            try await waitUntil(60) {
                try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE state = 'succeeded' AND cache_hit").value(0, "n") == "40"
            })
        // Phase 2: 20 misses of 2 MB each, in one statement (one NOTIFY, all visible at once),
        // claimed in one go.
        let tag = db.name
        let urls = (0..<20).map { "/files/pending-big.jpg?\(tag)=\($0)" }
        _ = try await db.query(
            """
            SELECT halcyon.enqueue($1 || '/files/pending-big.jpg?' || $2 || '=' || g, processors => 'blur(6) |> format(png)',
                                   cache_key => 'pending-miss-' || g)
            FROM generate_series(0, 19) AS g
            """, [TestEnvironment.origin, tag])
        var most = 0
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline {
            let counts = try Origin.counts()
            let downloaded = urls.reduce(0) { $0 + (counts[$1] ?? 0) }
            let done =
                Int(
                    try await db.query(
                        "SELECT count(*) AS n FROM halcyon.jobs WHERE cache_key LIKE 'pending-miss-%' AND state <> 'queued' AND state <> 'running'"
                    ).value(0, "n") ?? "0") ?? 0
            most = max(most, downloaded - done)
            if done == urls.count { break }
            try await Task.sleep(for: .milliseconds(30))
        }
        print("pending bytes: at most \(most) downloaded sources not yet processed (1 slot, 4 download slots, 1 MiB budget, 2 MB sources)")
        // What the bound is about: all 20 were claimed by one statement (a store-hit claim of up
        // to 250), so nothing but the byte budget held their downloads back. A claim stamps its
        // rows' started_at with its transaction's time; claims of 5 (1 slot + 4 downloads) would
        // leave several distinct times.
        let claims = try await db.query(
            """
            SELECT count(DISTINCT started_at) AS claims, count(*) FILTER (WHERE attempt = 1) AS first
            FROM halcyon.jobs WHERE cache_key LIKE 'pending-miss-%'
            """)
        #expect(
            claims.value(0, "claims") == "1" && claims.value(0, "first") == "20", "the 20 misses were not claimed in one go: \(claims.dictionaries)")
        // In a slot (1) + one waiting, over the budget (1) + the other download slots' downloads,
        // started before it filled (3): 5 held at most — 5 measured. One more may be counted
        // while its outcome is being recorded (the count of done jobs comes from the rows).
        #expect(most <= 6, "\(most) downloaded bodies were held at once")
        #expect(
            try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE cache_key LIKE 'pending-miss-%' AND state = 'succeeded'").value(0, "n")
                == "20")
        w.signal(SIGTERM)
        #expect(await w.wait(timeout: 30) == 0)
    }

    /// Enqueues a job for each of `sources` in one statement (one NOTIFY, one claim); their ids.
    static func enqueue(_ db: TestDatabase, _ sources: [String], processors: String = "resize(64x64) |> format(png)") async throws -> [String] {
        let array = "{" + sources.map { "\"\($0)\"" }.joined(separator: ",") + "}"
        let rows = try await db.query(
            "SELECT halcyon.enqueue(s, processors => $2) AS id FROM unnest($1::text[]) WITH ORDINALITY AS u(s, n) ORDER BY n", [array, processors])
        return (0..<rows.count).compactMap { rows.value($0, "id") }
    }

    /// Waits until the jobs `ids` have all finished (or `timeout` seconds passed): the seconds
    /// from their enqueueing to the last one's end, as the rows record them, and their rows.
    static func finished(_ db: TestDatabase, _ ids: [String], timeout: Double) async throws -> (seconds: Double?, rows: [[String: String?]]) {
        let list = "{" + ids.joined(separator: ",") + "}"
        _ = try await waitUntil(timeout) {
            try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE id = ANY($1::bigint[]) AND finished_at IS NULL", [list])
                .value(0, "n") == "0"
        }
        let span = try await db.query(
            """
            SELECT extract(epoch FROM max(finished_at) - min(created_at))::float8 AS s, bool_and(finished_at IS NOT NULL) AS all_done
            FROM halcyon.jobs WHERE id = ANY($1::bigint[])
            """, [list])
        let rows = try await db.query(
            "SELECT id, state::text, attempt, errors::text, last_error FROM halcyon.jobs WHERE id = ANY($1::bigint[]) ORDER BY id", [list])
        return (span.value(0, "all_done") == "t" ? span.value(0, "s").flatMap(Double.init) : nil, rows.dictionaries)
    }

    /// The origin's files for the budget tests (`slow`, the 5 MB `budget-fast.jpg` and a tiny
    /// bystander, whose URL is returned) and a ready in-process worker with a budget of `budget`:
    /// two processing slots, download slots and per-host downloads for every job at once.
    static func budgetWorker(
        _ db: TestDatabase, budget: String, slow: (name: String, data: Data), adjust: (inout WorkerConfiguration) -> Void = { _ in }
    ) async throws -> (TestWorker, String) {
        _ = try Origin.publish(slow.name, slow.data)
        _ = try Origin.publish("budget-fast.jpg", try Self.paddedJPEG(megabytes: 5))
        let tiny = try Origin.publish("budget-tiny.png", try SampleImages.solid(width: 8, height: 8, red: 9, green: 8, blue: 7))
        let w = try TestWorker(
            [
                "work", "--store", try TestEnvironment.temporaryDirectory("store").path, "--allow-network", "127.0.0.1/32",
                "--concurrency", "2", "--fetch-concurrency", "12", "--per-host-concurrency", "16", "--max-pending-bytes", budget,
                "--log-level", "info",
            ],
            conninfo: db.conninfo, adjust: adjust)
        try await w.ready()
        return (w, tiny)
    }

    /// An origin that sends most of a big source fast and then drips it (above the low-speed
    /// abort) used to hold the budget: the oldest transfer under way was the one allowed past it,
    /// and while it dripped, fast sources beside it waited to start — 47.8 s each for 5 MB
    /// sources that take half a second alone. Now a transfer that stops moving parks its bytes
    /// (up to as much again as the budget) and gives up its place: three dripping 12 MiB sources
    /// fill a 32 MiB budget, and four 5 MB sources and a tiny bystander beside them take about
    /// as long as alone, while the drips go on.
    @Test func aSlowOriginDoesNotHoldTheBudgetFromFastSources() async throws {
        let db = try await TestDatabase.create()
        let slow = try Self.paddedJPEG(megabytes: 12)
        let (w, tiny) = try await Self.budgetWorker(db, budget: "32MiB", slow: ("budget-slow.jpg", slow))
        let o = TestEnvironment.origin, tag = db.name
        func fast(_ run: String) -> [String] { (0..<4).map { "\(o)/files/budget-fast.jpg?\(tag)-\(run)=\($0)" } }
        // Alone, twice (the first warms connections up).
        var alone: [Double] = []
        for run in ["alone1", "alone2"] {
            let (seconds, rows) = try await Self.finished(db, try await Self.enqueue(db, fast(run)), timeout: 60)
            #expect(rows.allSatisfy { $0["state"] == "succeeded" }, "\(rows)")
            alone.append(try #require(seconds))
        }
        // Three drips: all but 60 KB at once, then 2 KB/s (30 s: longer than the test needs them).
        let slowPaths = (0..<3).map { "/drip/\(slow.count - 60_000)/2000/budget-slow.jpg?\(tag)-slow=\($0)" }
        let slowIDs = try await Self.enqueue(db, slowPaths.map { o + $0 })
        #expect(
            try await waitUntil(30) {
                let counts = try Origin.counts()
                return slowPaths.allSatisfy { counts["burst " + $0] == 1 }
            }, "the slow sources' first parts did not arrive")
        // Two windows of their running time and more: they are judged not moving.
        try await Task.sleep(for: .seconds(4))
        let ids = try await Self.enqueue(db, fast("beside") + [tiny + "?\(tag)-bystander"])
        let (seconds, rows) = try await Self.finished(db, ids, timeout: 60)
        let slowStates = try await db.query(
            "SELECT count(*) FILTER (WHERE state = 'running') AS running FROM halcyon.jobs WHERE id = ANY($1::bigint[])",
            ["{" + slowIDs.joined(separator: ",") + "}"]
        ).value(0, "running")
        print(
            "pending bytes: 4 fast 5 MB sources alone \(alone.map { String(format: "%.2f s", $0) }), beside 3 dripping 12 MiB sources "
                + "\(seconds.map { String(format: "%.2f s", $0) } ?? "not done in 60 s") (32 MiB budget)")
        #expect(rows.allSatisfy { $0["state"] == "succeeded" && $0["attempt"] == "1" }, "\(rows)")
        let beside = try #require(seconds, "the fast sources did not finish beside the slow ones within 60 s")
        // Within twice their time alone (and a second of a busy machine's noise: held by the slow
        // ones, they took 26–48 s).
        #expect(beside <= 2 * alone.max()! + 1, "beside the slow sources \(beside) s, alone \(alone) s")
        #expect(slowStates == "3", "the fast sources finished only after the slow ones")
        await w.end()
    }

    /// A transfer held back by the budget is paused, not slow: with a 1 MiB budget, three
    /// sources that drip for 3 s after 8 MiB and four fast ones claimed together, the transfers
    /// wait their turns for longer than the 5 s download timeout here (and the 2 s low-speed
    /// window), and none fails `fetch.timeout` or is downloaded twice. libcurl's own limits
    /// counted the pause, and the transfers that waited failed with them.
    @Test func aTransferHeldBackByTheBudgetDoesNotTimeOut() async throws {
        let db = try await TestDatabase.create()
        let slow = try Self.paddedJPEG(megabytes: 8)
        let (w, tiny) = try await Self.budgetWorker(db, budget: "1MiB", slow: ("budget-drip.jpg", slow)) {
            $0.fetch.totalTimeout = .seconds(5)
            $0.fetch.lowSpeedTime = .seconds(2)
        }
        let o = TestEnvironment.origin, tag = db.name
        // The drips: all but 6 KB at once, then 2 KB/s (3 s), above the 1 KB/s low-speed limit.
        let slowPaths = (0..<3).map { "/drip/\(slow.count - 6000)/2000/budget-drip.jpg?\(tag)-slow=\($0)" }
        let fastPaths = (0..<4).map { "/files/budget-fast.jpg?\(tag)-fast=\($0)" }
        let bystander = tiny.dropFirst(o.count) + "?\(tag)-bystander"
        let ids = try await Self.enqueue(db, (slowPaths + fastPaths + [String(bystander)]).map { o + $0 })
        let (seconds, rows) = try await Self.finished(db, ids, timeout: 90)
        let took = seconds.map { String(format: "%.2f s", $0) } ?? "not done in 90 s"
        print("pending bytes: 3 drips, 4 fast 5 MB sources and a bystander with a 1 MiB budget: all done in \(took)")
        #expect(rows.count == 8 && rows.allSatisfy { $0["state"] == "succeeded" && $0["attempt"] == "1" && $0["errors"] == "[]" }, "\(rows)")
        // Each downloaded once: no transfer failed and was retried.
        let counts = try Origin.counts()
        for path in slowPaths + fastPaths + [String(bystander)] {
            #expect(counts[path] == 1, "\(path) was requested \(counts[path] ?? 0) times")
        }
        #expect(!w.output.contains("fetch.timeout"), "\(w.output.suffix(3000))")
        await w.end()
    }

    /// Downloads spend the memory `--max-memory` guards. Eight 60 MB sources (a JPEG and 60 MB
    /// after its end: a big download, a cheap decode), one processing slot, eight download slots,
    /// a 500 MiB ceiling: the bodies used to arrive faster than they were processed (up to the
    /// 256 MiB default budget and the transfers under way) and end the image process over the
    /// ceiling, charged to no job, again and again. Now the budget is a quarter of the
    /// ceiling, counted as the bytes arrive, and every job succeeds without a restart. A source
    /// bigger than half the ceiling fails at once (`fetch.too_large`, the ceiling named) rather
    /// than by the process's deaths.
    @Test func downloadsSpendTheMemoryTheCeilingGuards() async throws {
        let db = try await TestDatabase.create()
        let jpeg = try SampleImages.photo(width: 1000, height: 750, seed: 42)
        // Zeros after the image, as holes in the origin's files.
        func padded(_ name: String, to size: Int) throws -> String {
            let url = try Origin.publish(name, jpeg)
            #expect(truncate(TestEnvironment.originRoot.appendingPathComponent(name).path, off_t(size)) == 0)
            return url
        }
        let big = try padded("ceiling-60mb.jpg", to: 60 << 20)
        let huge = try padded("ceiling-300mb.jpg", to: 300 << 20)
        var ids: [String] = []
        for i in 0..<8 {
            ids.append(
                try await db.query(
                    "SELECT halcyon.enqueue($1, processors => 'blur(30) |> format(png)', cache_key => $2) AS id", ["\(big)?n=\(i)", "ceiling-\(i)"]
                ).value(0, "id")!)
        }
        let hugeID = try await db.query("SELECT halcyon.enqueue($1, processors => 'format(png)') AS id", [huge]).value(0, "id")!
        let w = try HalcyonProcess(
            [
                "work", "--drain", "--no-progress", "--store", try TestEnvironment.temporaryDirectory("store").path,
                "--allow-network", "127.0.0.1/32", "--concurrency", "1", "--fetch-concurrency", "8", "--max-memory", "500MiB",
                "--max-download-size", "1GiB", "--log-level", "info",
            ], conninfo: db.conninfo)
        try await w.ready()
        #expect(await w.wait(timeout: 300) == 0, "\(w.output.suffix(3000))")
        let rows = try await CrashContainmentTests.rows(db, ids + [hugeID])
        for id in ids {
            #expect(rows[id]?.state == "succeeded" && rows[id]?.attempt == 1 && rows[id]?.crashes == 0, "job \(id): \(String(describing: rows[id]))")
        }
        let h = try #require(rows[hugeID])
        #expect(h.state == "failed" && h.code == "fetch.too_large" && h.attempt == 1 && h.crashes == 0, "\(h)")
        #expect(h.lastError.contains("half of --max-memory"), "\(h.lastError)")
        let restarts = try await db.query("SELECT restarts FROM halcyon.workers ORDER BY started_at DESC LIMIT 1").value(0, "restarts")
        #expect(restarts == "0", "the image process was restarted \(restarts ?? "?") times: \(w.output.suffix(3000))")
    }

    /// Local files are read only a little ahead of the processing slots (two per slot), not
    /// one per download slot: the worker below may claim 9 jobs (1 slot + 8 downloads), and
    /// used to read all 9 sources at once. A read moves the file's atime (set two days back, so
    /// relatime moves it on the first read; the worker reads sources without O_NOATIME).
    @Test func localFilesAreReadOnlyALittleAheadOfTheSlots() async throws {
        let db = try await TestDatabase.create()
        let root = try TestEnvironment.temporaryDirectory("local-ahead")
        let jpeg = try Self.paddedJPEG(megabytes: 1)
        let old = Date().addingTimeInterval(-2 * 86_400)
        let paths = (0..<12).map { root.appendingPathComponent("source-\($0).jpg").path }
        for (i, path) in paths.enumerated() {
            try jpeg.write(to: URL(fileURLWithPath: path))
            let then = timespec(tv_sec: Int(old.timeIntervalSince1970), tv_nsec: 0)
            var times = [then, then]
            #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
            _ = try await db.query(
                "SELECT halcyon.enqueue($1, processors => 'blur(6) |> format(png)', cache_key => $2)", ["file://" + path, "local-ahead-\(i)"])
        }
        func readCount() -> Int {
            paths.filter { path in
                var st = stat()
                return stat(path, &st) == 0 && st.st_atim.tv_sec > Int(old.timeIntervalSince1970) + 3600
            }.count
        }
        #expect(readCount() == 0)
        let w = try TestWorker(
            [
                "work", "--store", try TestEnvironment.temporaryDirectory("store").path, "--file-root", root.path,
                "--concurrency", "1", "--fetch-concurrency", "8", "--log-level", "info",
            ],
            conninfo: db.conninfo)
        var most = 0, done = 0
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline {
            // Finished first, then read: a job counted finished was read before.
            done =
                Int(
                    try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE state IN ('succeeded', 'failed')").value(0, "n") ?? "0")
                ?? 0
            most = max(most, readCount() - done)
            if done == paths.count { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        print("local read-ahead: at most \(most) sources read and not finished (1 slot, 8 download slots)")
        #expect(done == paths.count)
        #expect(readCount() == paths.count, "every source's atime moved (a noatime mount would hide the reads)")
        // Two reads per slot, plus a job between its processing and its recorded outcome.
        #expect(most <= 4, "\(most) local sources were read ahead")
        #expect(
            try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE state = 'succeeded'").value(0, "n") == "12")
        w.signal(SIGTERM)
        #expect(await w.wait(timeout: 30) == 0)
    }
}
