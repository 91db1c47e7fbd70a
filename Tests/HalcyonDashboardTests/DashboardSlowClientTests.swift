import Foundation
import HalcyonDashboard
import HalcyonTestSupport
import Testing

/// Slow clients against the dashboard's server: 64 connections that each trickle a byte every
/// 4 s do not keep a normal request from being answered within a second, and each is dropped
/// once its request has not arrived whole within 5 s (408).
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"))
struct DashboardSlowClientTests {
    @Test func tricklingClientsDoNotHoldTheDashboard() async throws {
        let f = try await DashboardFixture.shared.value
        let server = try await f.server()
        defer { server.stop() }
        let outcome = try await SlowClients.run(port: server.port, path: "/assets/dashboard.css", host: "127.0.0.1:\(server.port)")
        print("dashboard, slow clients: \(outcome)")
        #expect(outcome.tricklingAtRequest == 64, "every trickling connection was still open when the request was made: \(outcome)")
        #expect(outcome.status == 200 && outcome.answeredIn < .seconds(1), "\(outcome)")
        #expect(outcome.stillOpen == 0, "a request that never completes is dropped in bounded time: \(outcome)")
        #expect(outcome.answered408 >= 63, "answered 408 (one may have been closed to make room): \(outcome)")
        // Still serving pages.
        #expect(try await HTTP.get(server, "/").status == 200)
    }
}
