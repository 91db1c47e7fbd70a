import Foundation
import FoundationNetworking
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import HalcyonS3
import HalcyonStore
import HalcyonTestSupport
import Testing

/// `halcyon work --store s3://…` against a real S3 server (SeaweedFS, started by
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
        let ids = try await helper.enqueue(db, [helper.job(TestEnvironment.origin + path, "resize(100x100, mode=fill) |> format(png)")])
        let work = ["work", "--drain", "--store", store, "--allow-network", "127.0.0.1/32", "--log-level", "info"]
        let first = try await run(db, work)
        #expect(first.exitCode == 0, "\(first.output.suffix(2000))")
        #expect(first.output.contains("store=\(store)/"), "the start line names the bucket: \(first.output.prefix(1500))")
        _ = try await helper.enqueue(db, [helper.job(TestEnvironment.origin + path, "RESIZE(100x100, mode=fill) >> format(png)")])
        let second = try await run(db, work)
        #expect(second.exitCode == 0, "\(second.output.suffix(2000))")
        let r = try await db.query("SELECT state::text, cache_hit, result_path, result_digest, result_width FROM halcyon.jobs ORDER BY id")
        #expect(r.value(0, "state") == "succeeded" && r.value(1, "state") == "succeeded")
        #expect(r.value(0, "cache_hit") == "f" && r.value(1, "cache_hit") == "t")
        #expect(r.value(1, "result_digest") == r.value(0, "result_digest") && r.value(1, "result_width") == "100")
        #expect(try Origin.counts()[path] == 1, "the hit made no request")
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
