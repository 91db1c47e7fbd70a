import Foundation
import HalcyonDomain
import HalcyonImage
import HalcyonQueue
import HalcyonS3
import HalcyonSamples
import HalcyonTestSupport
import Testing

/// `s3://` sources end to end: a real `halcyon work --drain` given the AWS variables of the test
/// S3 server (SeaweedFS), reading a job's source, a fallback after a failing http source, and a
/// watermark from it; a missing key fails its job; no credential reaches the rows or the log.
@Suite(
    .enabled(if: TestEnvironment.available && TestEnvironment.s3Available, "needs scripts/test (PostgreSQL, origin, SeaweedFS, binary)"), .processes)
struct S3SourceWorkerTests {
    @Test func aWorkerReadsSourcesFallbacksAndWatermarksFromS3() async throws {
        let bucket = TestEnvironment.s3Bucket
        let environment = [
            "AWS_ACCESS_KEY_ID": TestEnvironment.s3AccessKey, "AWS_SECRET_ACCESS_KEY": TestEnvironment.s3SecretKey,
            "AWS_ENDPOINT_URL_S3": TestEnvironment.s3Endpoint, "AWS_REGION": "us-east-1",
        ]
        let prefix = "worker-\(UUID().uuidString.prefix(8))"
        let s3 = try S3Client(configuration: try S3Configuration(url: "s3://\(bucket)/\(prefix)", environment: environment))
        _ = try await s3.put("photos/photo 1.jpg", data: try SampleImages.photo(width: 400, height: 300, seed: 35), contentType: "image/jpeg")
        _ = try await s3.put(
            "marks/mark.png", data: try SampleImages.solid(width: 100, height: 50, red: 0, green: 0, blue: 250), contentType: "image/png")
        let photo = "s3://\(bucket)/\(prefix)/photos/photo 1.jpg"
        let mark = "s3://\(bucket)/\(prefix)/marks/mark.png"

        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("s3-source-store")
        func enqueue(_ source: String, _ processors: String, fallbacks: [String] = []) async throws -> String {
            try await db.query(
                "SELECT halcyon.enqueue($1, processors => $2, fallback_sources => $3::text[]) AS id",
                [source, processors, "{" + fallbacks.map { "\"\($0)\"" }.joined(separator: ",") + "}"]
            ).value(0, "id") ?? ""
        }
        let direct = try await enqueue(photo, "resize(200x150) |> format(png)")
        let fallback = try await enqueue("\(TestEnvironment.origin)/status/404?\(db.name)", "resize(100x75) |> format(png)", fallbacks: [photo])
        let marked = try await enqueue(photo, "watermark(\"\(mark)\", scale=0.25, opacity=1) |> format(png)")
        let missing = try await enqueue("s3://\(bucket)/\(prefix)/nothing.jpg", "format(png)")

        let worker = try HalcyonProcess(
            ["work", "--drain", "--no-progress", "--store", store.path, "--log-level", "debug", "--allow-network", "127.0.0.1/32"],
            conninfo: db.conninfo, environment: environment)
        #expect(await worker.wait(timeout: 120) == 0, "\(worker.output.suffix(3000))")

        let rows = try await db.query(
            """
            SELECT id::text, state::text, result_width, result_height, result_source, result_path, errors::text AS errors,
                   errors -> -1 ->> 'code' AS code, last_error
            FROM halcyon.jobs ORDER BY id
            """)
        var byID: [String: [String: String?]] = [:]
        for row in rows.dictionaries { byID[row["id"].flatMap { $0 } ?? ""] = row }
        for (id, width, height) in [(direct, "200", "150"), (fallback, "100", "75"), (marked, "400", "300")] {
            let row = try #require(byID[id])
            #expect(row["state"] == "succeeded", "\(row)")
            #expect(row["result_width"] == width && row["result_height"] == height, "\(row)")
            #expect(row["result_source"] == photo, "\(row)")
        }
        let markedPath = try #require(byID[marked]?["result_path"] ?? nil)
        let bytes = try #require(FileManager.default.contents(atPath: store.appendingPathComponent(markedPath).path))
        #expect(try MagickImage.decode(bytes, format: .png).pixel(x: 334, y: 259).blue > 0.95, "the S3 watermark at the south-east corner")

        let failed = try #require(byID[missing])
        #expect(failed["state"] == "failed" && failed["code"] == "fetch.http_status", "\(failed)")
        #expect((failed["last_error"] ?? nil)?.contains("404") == true, "\(failed)")

        let everything = rows.dictionaries.description + worker.output
        for secret in [TestEnvironment.s3SecretKey, TestEnvironment.s3AccessKey] {
            #expect(!everything.contains(secret), "a credential in the rows or the worker's log")
        }
    }
}
