import Foundation
import HalcyonTestSupport
import Testing

/// Slow clients against the dashboard's server: 64 connections that each trickle a byte every
/// 4 s do not keep a normal request from being answered within a second, and each is dropped
/// once its request has not arrived whole within 5 s (408). The server is a real `halcyon
/// dashboard` process, as deployed: the test process's own threads (busy with the rest of the
/// suite) play no part in how fast it answers.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct DashboardSlowClientTests {
    @Test func tricklingClientsDoNotHoldTheDashboard() async throws {
        let f = try await DashboardFixture.shared.value
        let dashboard = try HalcyonProcess(
            ["dashboard", "--port", "0", "--store", f.store.path, "--log-level", "info"], conninfo: f.db.conninfo)
        defer { dashboard.signal(SIGKILL) }
        var url: String?
        _ = try await waitUntil(120) {
            url = dashboard.output.split(whereSeparator: { $0 == " " || $0 == "\n" }).first { $0.hasPrefix("http://127.0.0.1:") }.map(String.init)
            return url != nil
        }
        let port = try #require(url.flatMap { URLComponents(string: $0)?.port }, "\(dashboard.output)")
        let outcome = try await SlowClients.run(port: port, path: "/assets/dashboard.css", host: "127.0.0.1:\(port)")
        print("dashboard, slow clients: \(outcome)")
        #expect(outcome.tricklingAtRequest == 64, "every trickling connection was still open when the request was made: \(outcome)")
        #expect(outcome.status == 200 && outcome.answeredIn < .seconds(1), "\(outcome)")
        #expect(outcome.stillOpen == 0, "a request that never completes is dropped in bounded time: \(outcome)")
        #expect(outcome.answered408 >= 63, "answered 408 (one may have been closed to make room): \(outcome)")
        // Still serving pages.
        #expect(try SlowClients.get(port: port, path: "/", host: "127.0.0.1:\(port)") == 200)
        dashboard.signal(SIGTERM)
        #expect(await dashboard.wait(timeout: 30) == 0, "\(dashboard.output)")
    }
}
