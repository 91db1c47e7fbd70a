import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonStore
import HalcyonTestSupport
import Synchronization
import Testing

/// Forty clients downloading a 60 MiB result slowly from a real `halcyon dashboard` process, from
/// a store on disk and from one in a bucket: the dashboard's memory stays bounded (results are
/// streamed a chunk at a time, each read once the client has taken the last), every client gets
/// exactly the object's bytes, and the overview answers while every stream is held.
///
/// Before results were streamed, each request read the whole object before answering: forty
/// readers took a dashboard to 3 GB (and 64 stopped the overview). The clients read slowly until
/// every response has begun — by then the old dashboard held forty copies — so the test waits on
/// that progress, not on a clock.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes(2), .serialized)
struct DashboardSlowReaderTests {
    static let size = 60 << 20
    static let clients = 40
    /// The dashboard's peak resident set, at most (it idles at about 40 MiB).
    static let boundKiB = 300 << 10

    /// `count` bytes of a xorshift sequence: no two chunks alike, so a misplaced one shows.
    static func pattern(_ count: Int, seed: UInt64) -> Data {
        var data = Data(count: count)
        data.withUnsafeMutableBytes { raw in
            var x = seed | 1
            for i in stride(from: 0, to: raw.count, by: 8) {
                x ^= x << 13
                x ^= x >> 7
                x ^= x << 17
                withUnsafeBytes(of: x) { raw.baseAddress!.advanced(by: i).copyMemory(from: $0.baseAddress!, byteCount: min(8, raw.count - i)) }
            }
        }
        return data
    }

    static let info = ResultInfo(format: "png", width: 1, height: 1)

    @Test func slowReadersOfALargeResultOnDiskLeaveTheDashboardSmall() async throws {
        let f = try await DashboardFixture.shared.value
        let dir = try TestEnvironment.temporaryDirectory("dashboard-large")
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = Self.pattern(Self.size, seed: 60)
        let object = try await DiskStore(root: dir).store(data, ext: "png", info: Self.info, key: "large", expiration: .days(1))
        try await Self.readSlowly(store: dir.path, environment: [:], digest: object.digest, data: data, f, what: "disk")
    }

    @Test(.enabled(if: TestEnvironment.s3Available, "needs SeaweedFS"))
    func slowReadersOfALargeResultInABucketLeaveTheDashboardSmall() async throws {
        let f = try await DashboardFixture.shared.value
        let url = TestEnvironment.s3StoreURL()
        let store = try StoreLocation(parsing: url, environment: TestEnvironment.s3Environment).open()
        let data = Self.pattern(Self.size, seed: 61)
        let object = try await store.store(data, ext: "png", info: Self.info, key: "large", expiration: .days(1))
        try await Self.readSlowly(store: url, environment: TestEnvironment.s3Environment, digest: object.digest, data: data, f, what: "S3")
    }

    static func readSlowly(
        store: String, environment: [String: String], digest: String, data: Data, _ f: DashboardFixture, what: String
    ) async throws {
        let dashboard = try HalcyonProcess(
            ["dashboard", "--port", "0", "--store", store, "--log-level", "info"], conninfo: f.db.conninfo, environment: environment)
        defer { dashboard.signal(SIGKILL) }
        var url: String?
        _ = try await waitUntil(120) {
            url = dashboard.output.split(whereSeparator: { $0 == " " || $0 == "\n" }).first { $0.hasPrefix("http://127.0.0.1:") }.map(String.init)
            return url != nil
        }
        let port = try #require(url.flatMap { URLComponents(string: $0)?.port }, "\(dashboard.output)")
        let host = "127.0.0.1:\(port)"
        let idle = dashboard.peakRSSKiB
        let overview = Mutex<(status: Int, took: Duration)>((0, .zero))
        // A few KB every 100 ms each until every response has begun and the overview has been
        // asked for meanwhile (three seconds at least); then the rest as fast as it comes.
        let outcome = try await SlowReaders.run(
            port: port, path: "/results/\(digest)", host: host, count: clients, expected: data, slow: 3
        ) {
            let started = ContinuousClock.now
            // Answered within the client's 10 s receive timeout, or 0.
            let status = (try? SlowClients.get(port: port, path: "/", host: host)) ?? 0
            overview.withLock { $0 = (status, ContinuousClock.now - started) }
        }
        let peak = dashboard.peakRSSKiB
        let (status, took) = overview.withLock { $0 }
        print(
            "dashboard, \(clients) slow readers of a \(size >> 20) MiB result (\(what)): peak RSS \(peak >> 10) MiB (idle \(idle >> 10) MiB); "
                + "overview \(status) in \(took); \(outcome)")
        #expect(Digest.sha256Hex(data) == digest)
        #expect(outcome.headsAfter != nil, "every client had a response head: \(outcome)")
        #expect(outcome.complete(size) == clients, "every client got exactly the object's bytes (so its digest): \(outcome)")
        #expect(peak < boundKiB, "peak RSS \(peak >> 10) MiB with \(clients) slow readers (\(what))")
        #expect(status == 200, "the overview while every stream was held: \(status) after \(took)")
        dashboard.signal(SIGTERM)
        #expect(await dashboard.wait(timeout: 30) == 0, "\(dashboard.output.suffix(2000))")
    }
}
