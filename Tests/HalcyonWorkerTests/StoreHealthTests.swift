import Foundation
import FoundationNetworking
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import HalcyonSamples
import HalcyonTestSupport
import Testing

/// A store that cannot take writes — a filesystem that fills, a read-only one — is the worker's
/// condition, not the jobs': against a real small filesystem (a tmpfs mounted for each test), the
/// jobs it catches go back to `queued` unspent, claiming pauses, `/healthz` and the metrics say
/// why, a size limit's trim makes room at once, and claiming resumes by itself. A result larger
/// than the whole store fails alone with its own code.
@Suite(
    .enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin)"),
    .enabled(if: SmallFilesystem.problem == nil, "\(SmallFilesystem.problem ?? "")"), .serialized)
struct StoreHealthTests {
    let helper = WorkerTests()

    /// `count` noise PNGs of `side`×`side` (about 3 bytes a pixel whatever the encoder does),
    /// published on the origin; their URLs.
    static func noiseSources(_ tag: String, count: Int, side: Int, seed: UInt64 = 1) throws -> [String] {
        try (0..<count).map { i in
            var state = seed &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(i + 1) &* 0xBF58_476D_1CE4_E5B9
            var pixels = [UInt8](repeating: 0, count: side * side * 3)
            for j in stride(from: 0, to: pixels.count, by: 8) {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                withUnsafeBytes(of: state) { bytes in
                    for k in 0..<min(8, pixels.count - j) { pixels[j + k] = bytes[k] }
                }
            }
            let png = try SampleImages.encode(pixels: pixels, width: side, height: side, alpha: false, format: .png, quality: 90)
            return try Origin.publish("noise-\(tag)-\(i).png", png)
        }
    }

    func enqueue(_ db: TestDatabase, _ sources: [String], chain: String = "format(png)") async throws {
        _ = try await helper.enqueue(db, sources.map { helper.job($0, chain) })
    }

    /// Rows charged for the store's condition: failed, or with an attempt spent beyond their one
    /// run, or an error on them.
    func charged(_ db: TestDatabase, except: String = "false") async throws -> [[String?]] {
        try await db.query(
            """
            SELECT id, state::text, attempt, last_error FROM halcyon.jobs
            WHERE NOT (\(except)) AND (state = 'failed' OR attempt > 1 OR errors <> '[]' OR (state = 'queued' AND attempt <> 0))
            ORDER BY id LIMIT 20
            """
        ).rows
    }

    /// The worker's `/metrics` and `/healthz` URLs, from its start line.
    func endpoints(_ w: TestWorker) throws -> (metrics: String, health: String) {
        let metrics = try #require(
            w.output.split(whereSeparator: { $0 == " " || $0 == "\n" }).first { $0.hasPrefix("url=http://") }.map { String($0.dropFirst(4)) },
            "\(w.output)")
        return (metrics, metrics.replacingOccurrences(of: "/metrics", with: "/healthz"))
    }

    func get(_ url: String) async throws -> (status: Int, body: String) {
        let (data, response) = try await URLSession.shared.data(from: try #require(URL(string: url)))
        return ((response as? HTTPURLResponse)?.statusCode ?? -1, String(decoding: data, as: UTF8.self))
    }

    /// The value of an unlabelled gauge in Prometheus text.
    func gauge(_ name: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
    }

    /// The acceptance case: 120 jobs of 1.5 MB results into a 25 MB store with nothing to trim
    /// it. The store fills; no job fails and none spends a second attempt; the worker pauses
    /// (its bystanders — a job for a result already stored, one whose source is missing — are
    /// not claimed meanwhile) and a stop request while paused ends it at once with every job
    /// queued unspent. Once an operator frees space (deleting results as the store fills again),
    /// a worker resumes by itself and every job succeeds at its first attempt, the bystanders
    /// with their own outcomes; no temp file or partial object is left.
    @Test(.workers) func aFullStoreReleasesJobsUnchargedAndClaimingResumesWhenSpaceIsFreed() async throws {
        let fs = try SmallFilesystem(megabytes: 25)
        defer { fs.unmount() }
        let db = try await TestDatabase.create()
        let sources = try Self.noiseSources(db.name, count: 120, side: 700)
        try await enqueue(db, sources)
        let w = try await helper.worker(db, store: fs.directory, ["--store-min-free", "0", "--concurrency", "2", "--metrics-port", "0"])
        let paused = try await waitUntil(90) { w.output.contains("the store cannot take writes") }
        #expect(paused, "\(w.output.suffix(3000))")
        let succeededBefore = try await helper.count(db, "state = 'succeeded'")
        #expect(succeededBefore >= 10 && succeededBefore < 20, "\(succeededBefore) results of 1.5 MB in 25 MB")
        #expect(w.output.contains("No space left on device"), "\(w.output.suffix(3000))")
        let (_, health) = try endpoints(w)
        let answer = try await get(health)
        #expect(answer.status == 503 && answer.body.contains("the store cannot take writes"), "\(answer)")
        // Bystanders, enqueued while the store is full: a result already stored, a missing source.
        let stored = try #require(try await db.query("SELECT source FROM halcyon.jobs WHERE state = 'succeeded' LIMIT 1").value(0, "source"))
        try await enqueue(db, [stored, "\(TestEnvironment.origin)/status/404?t=\(db.name)"])
        try await Task.sleep(for: .seconds(4))
        #expect(try await helper.count(db, "state = 'running'") == 0, "jobs claimed while the store is full")
        let charged1 = try await charged(db)
        #expect(charged1.isEmpty, "\(charged1)")

        // A stop request while paused: the worker ends at once, nothing charged.
        let stopAsked = ContinuousClock.now
        w.signal(SIGTERM)
        #expect(await w.wait(timeout: 30) == 0, "\(w.output.suffix(2000))")
        #expect(ContinuousClock.now - stopAsked < .seconds(10))
        let charged2 = try await charged(db)
        #expect(charged2.isEmpty, "\(charged2)")

        // An operator frees space (and keeps freeing it as the store fills again): a worker
        // resumes by itself and every job succeeds.
        let freed = ContinuousClock.now
        let again = try await helper.worker(db, store: fs.directory, ["--store-min-free", "0", "--concurrency", "2"])
        let done = try await waitUntil(300) {
            if fs.freeBytes < 4 << 20 { fs.removeResults() }
            return try await helper.count(db, "state IN ('succeeded', 'failed')") == 122
        }
        #expect(done, "\(again.output.suffix(3000))")
        print("store health: \(succeededBefore) of 120 before the pause; all done \(ContinuousClock.now - freed) after space was freed")
        #expect(try await helper.count(db, "state = 'succeeded'") == 121)
        let missing = try await db.query("SELECT state::text, attempt, last_error FROM halcyon.jobs WHERE source LIKE '%/status/404%'")
        #expect(missing.value(0, "state") == "failed" && missing.value(0, "attempt") == "1", "\(missing.rows)")
        #expect(missing.value(0, "last_error")?.hasPrefix("fetch.") == true, "\(missing.rows)")
        let unexpected = try await charged(db, except: "source LIKE '%/status/404%'")
        #expect(unexpected.isEmpty, "\(unexpected)")
        again.signal(SIGTERM)
        #expect(await again.wait(timeout: 60) == 0)
        try fs.expectNoPartialFiles()
    }

    /// With `--store-size-limit`, a full store is the sweep's to fix: the pause asks for a sweep
    /// at once, its trim makes room, and the worker resumes by itself — 120 jobs of 1.5 MB
    /// through a 25 MB store all succeed at their first attempt with nobody freeing anything.
    @Test(.workers) func withASizeLimitTheSweepsTrimMakesRoomAndEveryJobSucceeds() async throws {
        let fs = try SmallFilesystem(megabytes: 25)
        defer { fs.unmount() }
        let db = try await TestDatabase.create()
        let sources = try Self.noiseSources(db.name, count: 120, side: 700, seed: 2)
        try await enqueue(db, sources)
        let started = ContinuousClock.now
        let w = try await helper.worker(
            db, store: fs.directory, ["--store-size-limit", "16MiB", "--sweep-interval", "1d", "--concurrency", "2", "--metrics-port", "0"])
        let done = try await waitUntil(300) { try await helper.count(db, "state IN ('succeeded', 'failed')") == 120 }
        #expect(done, "\(w.output.suffix(3000))")
        print("store health: 120 jobs through a 25 MB store with a 16 MiB size limit in \(ContinuousClock.now - started)")
        #expect(try await helper.count(db, "state = 'succeeded'") == 120)
        let charged3 = try await charged(db)
        #expect(charged3.isEmpty, "\(charged3)")
        #expect(w.output.contains("store swept"), "the trim ran: \(w.output.suffix(3000))")
        w.signal(SIGTERM)
        #expect(await w.wait(timeout: 60) == 0)
        try fs.expectNoPartialFiles()
    }

    /// A result larger than the store's whole filesystem, or than its size limit, can never be
    /// stored: that job fails alone with `store.result_too_large`, at its first attempt, the job
    /// beside it succeeds, and the worker never pauses.
    @Test(.workers) func aResultLargerThanTheStoreFailsAloneWithItsCode() async throws {
        let fs = try SmallFilesystem(megabytes: 4)
        defer { fs.unmount() }
        let db = try await TestDatabase.create()
        let huge = try Self.noiseSources(db.name + "-huge", count: 1, side: 1400, seed: 3)  // about 5.9 MB
        let large = try Self.noiseSources(db.name + "-large", count: 1, side: 700, seed: 4)  // about 1.5 MB
        let small = try Self.noiseSources(db.name + "-small", count: 2, side: 100, seed: 5)
        try await enqueue(db, [huge[0], small[0]])
        let w = try await helper.worker(db, store: fs.directory, ["--drain"])
        #expect(await w.wait(timeout: 120) == 0, "\(w.output.suffix(2000))")
        let rows = try await db.query("SELECT source, state::text, attempt, last_error FROM halcyon.jobs ORDER BY id")
        #expect(rows.value(0, "state") == "failed" && rows.value(0, "attempt") == "1", "\(rows.rows)")
        #expect(rows.value(0, "last_error")?.hasPrefix("store.result_too_large: ") == true, "\(rows.rows)")
        #expect(rows.value(0, "last_error")?.contains("whole filesystem") == true, "\(rows.rows)")
        #expect(rows.value(1, "state") == "succeeded", "\(rows.rows)")
        #expect(!w.output.contains("claiming paused"), "\(w.output.suffix(2000))")

        // Over the size limit: refused before anything is written.
        try await enqueue(db, [large[0], small[1]])
        let limited = try await helper.worker(db, store: fs.directory, ["--drain", "--store-size-limit", "1MiB"])
        #expect(await limited.wait(timeout: 120) == 0, "\(limited.output.suffix(2000))")
        let more = try await db.query("SELECT state::text, attempt, last_error FROM halcyon.jobs WHERE id > 2 ORDER BY id")
        #expect(more.value(0, "state") == "failed" && more.value(0, "attempt") == "1", "\(more.rows)")
        #expect(more.value(0, "last_error")?.contains("size limit") == true, "\(more.rows)")
        #expect(more.value(1, "state") == "succeeded", "\(more.rows)")
        try fs.expectNoPartialFiles()
    }

    /// `/healthz` and the metrics say why a worker claims nothing: a store made read-only under
    /// a running worker turns `/healthz` to 503 with the reason and `halcyon_store_available` to
    /// 0 (its free and total bytes exported all along); the job caught goes back unspent, and
    /// once the store takes writes again the worker is healthy and the job succeeds at its first
    /// attempt.
    @Test(.workers) func healthAndMetricsSayWhyWhileTheStoreCannotTakeWrites() async throws {
        let fs = try SmallFilesystem(megabytes: 8)
        defer { fs.unmount() }
        let db = try await TestDatabase.create()
        let sources = try Self.noiseSources(db.name, count: 2, side: 200, seed: 6)
        let w = try await helper.worker(db, store: fs.directory, ["--metrics-port", "0"])
        let (metrics, health) = try endpoints(w)
        try await enqueue(db, [sources[0]])
        #expect(try await waitUntil(60) { try await helper.count(db, "state = 'succeeded'") == 1 })
        #expect(try await get(health) == (200, "ok\n"))
        let before = try await get(metrics).body
        #expect(gauge("halcyon_store_available", in: before) == 1, "\(before)")
        #expect(gauge("halcyon_store_filesystem_bytes", in: before) == Double(8 << 20), "\(before)")
        #expect((gauge("halcyon_store_free_bytes", in: before) ?? 0) > Double(7 << 20), "\(before)")

        try fs.remount(readOnly: true)
        try await enqueue(db, [sources[1]])
        #expect(try await waitUntil(60) { (try? await get(health).status) == 503 }, "\(w.output.suffix(2000))")
        let answer = try await get(health)
        #expect(answer.body.contains("the store cannot take writes") && answer.body.contains("Read-only file system"), "\(answer.body)")
        #expect(gauge("halcyon_store_available", in: try await get(metrics).body) == 0)
        #expect(try await waitUntil(30) { try await helper.count(db, "state = 'queued' AND attempt = 0") == 1 })

        try fs.remount(readOnly: false)
        #expect(try await waitUntil(60) { try await helper.count(db, "state = 'succeeded'") == 2 }, "\(w.output.suffix(2000))")
        #expect(try await get(health) == (200, "ok\n"))
        #expect(gauge("halcyon_store_available", in: try await get(metrics).body) == 1)
        let charged4 = try await charged(db)
        #expect(charged4.isEmpty, "\(charged4)")
        #expect(w.output.contains("the store takes writes again"))
        w.signal(SIGTERM)
        #expect(await w.wait(timeout: 60) == 0)
    }
}

/// A tmpfs of a few megabytes mounted for one test (the suite runs as root), unmounted at its end.
struct SmallFilesystem {
    let directory: URL

    /// Why no tmpfs can be mounted here (not root, no permission), or nil.
    static let problem: String? = {
        guard getuid() == 0 else { return "mounting a small tmpfs needs root" }
        guard let fs = try? SmallFilesystem(megabytes: 1) else { return "mount -t tmpfs is not permitted here" }
        fs.unmount()
        return nil
    }()

    init(megabytes: Int) throws {
        directory = try TestEnvironment.temporaryDirectory("tmpfs")
        guard mount("tmpfs", directory.path, "tmpfs", 0, "size=\(megabytes)m,mode=0755") == 0 else {
            throw HalcyonError(.internal, "mount tmpfs on \(directory.path): \(String(cString: strerror(errno)))")
        }
    }

    func remount(readOnly: Bool) throws {
        let flags = UInt(MS_REMOUNT) | (readOnly ? UInt(MS_RDONLY) : 0)
        guard mount("tmpfs", directory.path, "tmpfs", flags, nil) == 0 else {
            throw HalcyonError(.internal, "remount \(directory.path): \(String(cString: strerror(errno)))")
        }
    }

    func unmount() {
        umount2(directory.path, Int32(MNT_DETACH))
    }

    var freeBytes: Int64 {
        var s = statvfs()
        guard statvfs(directory.path, &s) == 0 else { return 0 }
        return Int64(s.f_bavail) * Int64(s.f_frsize)
    }

    /// What an operator freeing space does: the stored results go (their keys then name nothing,
    /// a miss). Their directories stay, as a clean-up by age would leave them.
    func removeResults() {
        let objects = directory.appendingPathComponent("objects")
        for case let path as String in FileManager.default.enumerator(atPath: objects.path) ?? FileManager.DirectoryEnumerator()
        where path.hasSuffix(".png") {
            unlink(objects.appendingPathComponent(path).path)
        }
    }

    /// No temp file left in `tmp/`, and every object's size is what its name's digest says it holds.
    func expectNoPartialFiles(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let temps = (try? FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("tmp").path)) ?? []
        #expect(temps.isEmpty, "temp files left: \(temps)", sourceLocation: sourceLocation)
        let objects = directory.appendingPathComponent("objects")
        for case let path as String in FileManager.default.enumerator(atPath: objects.path) ?? FileManager.DirectoryEnumerator()
        where path.hasSuffix(".png") {
            let data = try Data(contentsOf: objects.appendingPathComponent(path))
            let name = (path as NSString).lastPathComponent.split(separator: ".")[0]
            #expect(Digest.sha256Hex(data) == name, "\(path) is not whole", sourceLocation: sourceLocation)
        }
    }
}
