import Foundation
import HalcyonDashboard
import HalcyonDomain
import HalcyonRuntime
import HalcyonS3
import HalcyonStore
import HalcyonTestSupport
import Testing

/// The dashboard on a store in a bucket (SeaweedFS, started by `scripts/test`): a result is
/// streamed through from the object store, bounded as on disk; a digest with no object is a 404.
@Suite(.enabled(if: TestEnvironment.available && TestEnvironment.s3Available, "needs scripts/test (PostgreSQL, SeaweedFS)"))
struct DashboardObjectStoreTests {
    @Test func resultsAreStreamedFromTheBucket() async throws {
        let f = try await DashboardFixture.shared.value
        let location = try StoreLocation(parsing: TestEnvironment.s3StoreURL(), environment: TestEnvironment.s3Environment)
        let bucket = try #require(try location.open() as? ObjectStore)
        let png = try Data(
            contentsOf: f.store.appendingPathComponent(
                try #require(
                    try await f.value(
                        "SELECT result_path AS v FROM halcyon.jobs WHERE id = $1::bigint", [String(f.magenta)]))))
        let object = try await bucket.store(png, ext: "png", info: ResultInfo(format: "png", width: 120, height: 80), key: "k", expiration: .days(1))
        let server = try await f.server { $0.store = location }
        defer { server.stop() }
        let image = try await HTTP.get(server, "/results/\(object.digest)")
        #expect(image.status == 200 && image.headers["content-type"] == "image/png")
        #expect(image.body == png)
        #expect(try await HTTP.get(server, "/results/\(String(repeating: "0", count: 64))").status == 404)
        let small = try await f.server {
            $0.store = location
            $0.maxResultBytes = png.count - 1
        }
        defer { small.stop() }
        let over = try await HTTP.get(small, "/results/\(object.digest)")
        #expect(over.status == 404, "over the bound: not read (\(over.status), \(over.body.count) bytes of \(png.count))")
    }
}
