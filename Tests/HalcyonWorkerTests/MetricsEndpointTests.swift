import Foundation
import HalcyonTestSupport
import Testing

/// A worker's metrics endpoint against slow clients: 64 connections that each trickle a byte
/// every 4 s do not keep `/healthz` from answering within a second (a container's health check
/// must not fail because someone holds connections open), and each is dropped once its request
/// has not arrived whole within 5 s (408). SIGTERM then stops the worker as usual.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct MetricsEndpointTests {
    let helper = WorkerTests()

    @Test func tricklingClientsDoNotHoldHealthz() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        // A process, as a container's health check finds it: in the test process the server's
        // accepts wait on a cooperative pool the other tests keep busy, which a worker's does not.
        let w = try await helper.workerProcess(db, store: store, ["--metrics-port", "0"])
        var url: String?
        _ = try await waitUntil(120) {
            url = w.output.split(whereSeparator: { $0 == " " || $0 == "\n" }).first { $0.hasPrefix("url=http://") }.map { String($0.dropFirst(4)) }
            return url != nil
        }
        let endpoint = try #require(url, "\(w.output)")
        let port = try #require(URLComponents(string: endpoint)?.port)
        let outcome = try await SlowClients.run(port: port, path: "/healthz", host: "127.0.0.1:\(port)")
        print("worker /healthz, slow clients: \(outcome)")
        #expect(outcome.tricklingAtRequest == 64, "\(outcome)")
        #expect(outcome.status == 200 && outcome.answeredIn < .seconds(1), "\(outcome)")
        #expect(outcome.stillOpen == 0, "a request that never completes is dropped in bounded time: \(outcome)")
        #expect(outcome.answered408 >= 63, "\(outcome)")
        #expect(try SlowClients.get(port: port, path: "/metrics", host: "127.0.0.1") == 200)
        w.signal(SIGTERM)
        #expect(await w.wait(timeout: 30) == 0, "\(w.output.suffix(2000))")
    }
}
