import Foundation
import FoundationNetworking
import HalcyonDomain
import HalcyonEmbedded
import HalcyonQueue
import HalcyonRuntime
import HalcyonS3
import HalcyonSamples
import HalcyonStore
import HalcyonTestSupport
import Testing

/// Workers with `--store s3://…` against a real S3 server (SeaweedFS, started by
/// `scripts/test`): results land in the bucket, a second job for the same key is a hit without a
/// download, `show` names the object and a link that fetches it, `sweep` and `verify` work on
/// the bucket. No directory is shared with the worker.
@Suite(.enabled(if: TestEnvironment.available && TestEnvironment.s3Available, "needs scripts/test (PostgreSQL, origin, SeaweedFS)"), .processes)
struct ObjectStoreWorkerTests {
    let helper = WorkerTests()

    struct Run {
        var exitCode: Int32?
        var output: String
    }

    /// A worker in this process with `arguments` and the S3 server's credentials, run to its end.
    func work(_ db: TestDatabase, _ arguments: [String], environment: [String: String] = TestEnvironment.s3Environment) async throws -> Run {
        let w = try TestWorker(arguments, conninfo: db.conninfo, environment: environment)
        let status = await w.wait(timeout: 180)
        return Run(exitCode: status, output: w.output)
    }

    func run(_ db: TestDatabase?, _ arguments: [String]) async throws -> Run {
        let p = try HalcyonProcess(arguments, conninfo: db?.conninfo, environment: TestEnvironment.s3Environment)
        let status = await p.wait(timeout: 180)
        return Run(exitCode: status, output: p.output)
    }

    @Test func aWorkerStoresInTheBucketAndASecondJobIsAHit() async throws {
        let db = try await TestDatabase.create()
        let store = TestEnvironment.s3StoreURL()
        _ = try WorkerTests.published()
        let path = "/files/photo.jpg?t=\(db.name)"
        let ids = try await helper.enqueue(db, [helper.job(TestEnvironment.origin + path, "resize(100x100, mode=fill) |> format(jpeg, quality=70)")])
        let work = ["work", "--drain", "--store", store, "--allow-network", "127.0.0.1/32", "--log-level", "info"]
        let first = try await self.work(db, work)
        #expect(first.exitCode == 0, "\(first.output.suffix(2000))")
        #expect(first.output.contains("store=\(store)/"), "the start line names the bucket: \(first.output.prefix(1500))")
        _ = try await helper.enqueue(db, [helper.job(TestEnvironment.origin + path, "RESIZE(100x100, mode=fill) >> format(jpeg, quality=70.0)")])
        let second = try await self.work(db, work)
        #expect(second.exitCode == 0, "\(second.output.suffix(2000))")
        let r = try await db.query(
            "SELECT state::text, cache_hit, result_path, result_digest, result_width, result_quality FROM halcyon.jobs ORDER BY id")
        #expect(r.value(0, "state") == "succeeded" && r.value(1, "state") == "succeeded")
        #expect(r.value(0, "cache_hit") == "f" && r.value(1, "cache_hit") == "t")
        #expect(r.value(1, "result_digest") == r.value(0, "result_digest") && r.value(1, "result_width") == "100")
        #expect(try Origin.counts()[path] == 1, "the hit made no request")
        #expect(r.value(0, "result_quality") == "70" && r.value(1, "result_quality") == "70", "the hit reports the stored quality")
        let resultPath = try #require(r.value(0, "result_path"))
        #expect(resultPath.hasPrefix("objects/"))

        // show: the object's s3:// name and a link that fetches it without credentials.
        let show = try await run(db, ["show", String(ids[0]), "--json", "--store", store])
        #expect(show.exitCode == 0, "\(show.output)")
        guard case .object(let shown)? = JSONValue.parse(show.output) else {
            Issue.record("show --json: \(show.output)")
            return
        }
        #expect(shown["result_object"]?.stringValue == "\(store)/\(resultPath)")
        #expect(shown["result_quality"] == .number(70) && shown["result_score"] == .null)
        #expect(shown["result_expires"]?.stringValue?.hasPrefix("20") == true, "\(String(describing: shown["result_expires"]))")
        let link = try #require(shown["result_url"]?.stringValue.flatMap(URL.init(string:)))
        let (bytes, response) = try await URLSession.shared.data(from: link)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(Digest.sha256Hex(bytes) == r.value(0, "result_digest"))
        #expect(!show.output.contains(TestEnvironment.s3SecretKey), "no secret in show's output")

        let verify = try await run(nil, ["verify", "--store", store])
        #expect(verify.exitCode == 0 && verify.output.contains("checked 1 objects"), "\(verify.output)")
        // The bucket addressed as a host name (bucket.127.0.0.1, which does not resolve): the
        // listing fails, and verify says so and fails rather than report nothing checked.
        let unreachable = try await run(nil, ["verify", "--store", store, "--no-s3-path-style"])
        #expect(unreachable.exitCode == 1 && unreachable.output.contains("verify incomplete: listing"), "\(unreachable.output)")
        let sweep = try await run(db, ["sweep", "--store", store])
        #expect(sweep.exitCode == 0 && sweep.output.contains("store \(store)/"), "\(sweep.output)")
        #expect(sweep.output.contains("1 files") && sweep.output.contains("1 keys"), "\(sweep.output)")
    }

    /// Wrong credentials are a configuration error, not the jobs' fault: a worker whose secret
    /// the store refuses does not start (it used to start, and every job was downloaded,
    /// processed five times and failed for good with `store.access_denied`), and no job is touched.
    @Test func aWorkerTheStoreRefusesDoesNotStart() async throws {
        let db = try await TestDatabase.create()
        _ = try WorkerTests.published()
        _ = try await helper.enqueue(db, [helper.job("\(TestEnvironment.origin)/files/photo.jpg?t=\(db.name)", "resize(50x50) |> format(png)")])
        var environment = TestEnvironment.s3Environment
        environment["AWS_SECRET_ACCESS_KEY"] = String(TestEnvironment.s3SecretKey.reversed())
        let p = try await work(
            db, ["work", "--drain", "--store", TestEnvironment.s3StoreURL(), "--allow-network", "127.0.0.1/32"], environment: environment)
        #expect(p.exitCode != nil && p.exitCode != 0, "\(p.output.suffix(2000))")
        #expect(p.output.contains("refuses this worker's credentials") && p.output.contains("AWS_SECRET_ACCESS_KEY"), "\(p.output.suffix(2000))")
        #expect(!p.output.contains("worker started"), "\(p.output.suffix(2000))")
        let row = try await db.query("SELECT state::text AS s, attempt FROM halcyon.jobs")
        #expect(row.value(0, "s") == "queued" && row.value(0, "attempt") == "0", "\(row.rows)")
    }

    /// How the store starts refusing while the worker runs (a proxy in front of the S3 server).
    enum Refusal: String, CaseIterable, Sendable {
        /// A key revoked or rotated: every request answered 403 SignatureDoesNotMatch.
        case credentials
        /// A bucket policy that lets the key read but not write: writes answered 403 AccessDenied.
        case writes

        var signal: Int32 { self == .credentials ? SIGUSR1 : SIGHUP }
        /// What the worker logs and `/healthz` says while paused, and logs when it resumes.
        var paused: String { self == .credentials ? "refuses this worker's credentials" : "the store cannot take writes" }
        var resumed: String { self == .credentials ? "the store accepts this worker's credentials again" : "the store takes writes again" }
    }

    /// The store starts refusing the worker while it runs — its credentials, or only its writes
    /// once a probe's write confirms it: the jobs caught by it go back to `queued` with their
    /// attempt unspent, no more are claimed, `/healthz` answers 503 with the reason — and once the
    /// store takes writes again, the worker claims and every job succeeds, none charged.
    @Test(arguments: Refusal.allCases)
    func whileTheStoreRefusesJobsWaitUnchargedAndHealthSaysSo(_ refusal: Refusal) async throws {
        let db = try await TestDatabase.create()
        let socket = URL(fileURLWithPath: ProcessInfo.processInfo.environment["HALCYON_TEST_WORK"] ?? "/tmp").appendingPathComponent("s3/s3.sock")
        let dir = try TestEnvironment.temporaryDirectory("refusing-proxy")
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/refusing_proxy.py").path
        let portFile = dir.appendingPathComponent("port")
        let proxy = try Subprocess.spawn(
            "/usr/bin/env", ["python3", script, socket.path, portFile.path], outputPath: dir.appendingPathComponent("proxy.log").path)
        defer { kill(proxy, SIGKILL); _ = Subprocess.status(of: proxy, block: true) }
        #expect(try await waitUntil(60) { FileManager.default.fileExists(atPath: portFile.path) })
        var environment = TestEnvironment.s3Environment
        environment["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:\(try String(contentsOf: portFile, encoding: .utf8))"
        let image = try Origin.publish("refused-store.png", try SampleImages.photo(width: 200, height: 150, seed: 41, format: .png))
        func enqueue(_ range: Range<Int>) async throws {
            for i in range {
                _ = try await db.query("SELECT halcyon.enqueue($1, processors => 'resize(\(20 + i)x\(20 + i)) |> format(png)')", ["\(image)?i=\(i)"])
            }
        }
        try await enqueue(0..<3)
        let w = try TestWorker(
            [
                "work", "--store", TestEnvironment.s3StoreURL(), "--allow-network", "127.0.0.1/32", "--metrics-port", "0", "--log-level", "info",
                "--fetch-retries", "0",
            ], conninfo: db.conninfo, environment: environment)
        try await w.ready()
        #expect(try await waitUntil(120) { try await helper.count(db, "state = 'succeeded'") == 3 }, "\(w.output.suffix(2000))")
        let endpoint = try #require(
            w.output.split(whereSeparator: { $0 == " " || $0 == "\n" }).first { $0.hasPrefix("url=http://") }.map { String($0.dropFirst(4)) },
            "\(w.output)")
        let healthz = endpoint.replacingOccurrences(of: "/metrics", with: "/healthz")
        #expect(try await health(healthz) == (200, "ok\n"))

        kill(proxy, refusal.signal)  // the key is revoked, or loses its right to write
        try await enqueue(3..<13)
        #expect(try await waitUntil(120) { w.output.contains(refusal.paused) }, "\(w.output.suffix(2000))")
        #expect(try await waitUntil(60) { (try? await health(healthz).status) == 503 })
        #expect(try await health(healthz).body.contains(refusal.paused))
        try await Task.sleep(for: .seconds(3))
        #expect(try await helper.count(db, "state = 'failed'") == 0)
        #expect(try await helper.count(db, "state = 'queued' AND (attempt <> 0 OR errors <> '[]')") == 0, "a refused job was charged")
        #expect(try await helper.count(db, "state = 'running'") == 0, "jobs were claimed while the store refused")

        kill(proxy, SIGUSR2)  // the key works again, writes too
        #expect(try await waitUntil(180) { try await helper.count(db, "state = 'succeeded'") == 13 }, "\(w.output.suffix(3000))")
        let charged = try await db.query("SELECT id, attempt, errors FROM halcyon.jobs WHERE attempt <> 1").rows
        #expect(charged.isEmpty, "\(charged)")
        #expect(try await health(healthz) == (200, "ok\n"))
        #expect(w.output.contains(refusal.resumed), "\(w.output.suffix(3000))")
        w.signal(SIGTERM)
        #expect(await w.wait(timeout: 60) == 0, "\(w.output.suffix(2000))")
    }

    /// A worker's `/healthz`: its status and body.
    func health(_ url: String) async throws -> (status: Int, body: String) {
        let (data, response) = try await URLSession.shared.data(from: try #require(URL(string: url)))
        return ((response as? HTTPURLResponse)?.statusCode ?? -1, String(decoding: data, as: UTF8.self))
    }

    /// `show` with an S3 endpoint that does not answer says so, with the error, and fails: it
    /// used to say the result had expired and been swept.
    @Test func showSaysWhenTheStoreCannotBeReached() async throws {
        let db = try await TestDatabase.create()
        let id = try #require(
            try await db.query("SELECT halcyon.enqueue('https://example.com/a.jpg', 'format(png)') AS id").value(0, "id").flatMap { Int64($0) })
        try await db.query(
            "UPDATE halcyon.jobs SET state = 'succeeded', result_key = 'https://example.com/a.jpg@format(png)', result_path = $2 WHERE id = $1::bigint",
            [String(id), "objects/00/00/" + String(repeating: "0", count: 64) + ".png"])
        var environment = TestEnvironment.s3Environment
        // A port nothing listens on.
        environment["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:9"
        for json in [false, true] {
            let p = try HalcyonProcess(
                ["show", String(id), "--store", TestEnvironment.s3StoreURL()] + (json ? ["--json"] : []), conninfo: db.conninfo,
                environment: environment)
            let status = await p.wait(timeout: 120)
            #expect(status != 0 && status != nil, "\(p.output)")
            #expect(p.output.contains("could not be reached") && p.output.contains("store.read_failed"), "\(p.output)")
            #expect(!p.output.contains("expired and swept"), "\(p.output)")
            #expect(!p.output.contains(TestEnvironment.s3SecretKey))
        }
        // The store answering, the key absent: "not in the store", exit 0.
        let absent = try await run(db, ["show", String(id), "--store", TestEnvironment.s3StoreURL()])
        #expect(absent.exitCode == 0 && absent.output.contains("not in the store"), "\(absent.output)")
    }

    @Test func aStoreThatIsNeitherADirectoryNorS3IsRefused() async throws {
        let db = try await TestDatabase.create()
        let work = try await run(db, ["work", "--drain", "--store", "gs://bucket/results"])
        #expect(work.exitCode != 0 && work.output.contains("gs:// is not supported"), "\(work.output)")
        let bad = try await run(db, ["work", "--drain", "--store", "s3://No_Such"])
        #expect(bad.exitCode != 0 && bad.output.contains("bucket name"), "\(bad.output)")
        #expect(!FileManager.default.fileExists(atPath: "gs:") && !FileManager.default.fileExists(atPath: "s3:"))
    }
}
