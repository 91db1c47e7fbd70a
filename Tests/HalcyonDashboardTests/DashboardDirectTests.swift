import Foundation
import HalcyonDashboard
import HalcyonHTTP
import HalcyonRuntime
import HalcyonTestSupport
import Logging
import Testing

/// `DashboardServer.respond`: a request answered by the router and its middleware without a
/// socket (what a bench or a check times), with the headers a socket would carry.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"))
struct DashboardDirectTests {
    @Test func pagesAnswerWithoutASocket() async throws {
        let f = try await DashboardFixture.shared.value
        var c = DashboardConfiguration()
        c.port = 0
        c.storeRoot = f.store
        var logger = Logger(label: "dashboard-test")
        logger.logLevel = .critical
        let server = try await DashboardServer(configuration: c, conninfo: f.db.conninfo, logger: logger)  // not listening

        let api = await server.respond("GET", "/api/overview")
        #expect(api.status == 200 && api.headers["content-type"] == "application/json")
        #expect(JSONValue.parse(String(decoding: api.body, as: UTF8.self))?["counts"] != nil)
        #expect(api.headers["content-security-policy"]?.contains("default-src 'none'") == true && api.headers["cache-control"] == "no-store")

        let page = await server.respond("GET", "/jobs/\(f.photo)")
        #expect(page.status == 200 && String(decoding: page.body, as: UTF8.self).contains("resize(320x320,mode=fill)"))
        let head = await server.respond("HEAD", "/jobs/\(f.photo)")
        #expect(head.status == 200 && head.body.isEmpty && head.headers["content-length"] == String(page.body.count))

        // A form over the upload limit (no socket, so no guard before the body): 413 all the same.
        let big = await server.respond(
            "POST", "/jobs/retry", headers: ["Content-Type": "application/x-www-form-urlencoded"],
            body: Data(repeating: 0x61, count: c.http.maxBodyBytes + 1))
        #expect(big.status == 413, "\(big.status) \(String(decoding: big.body, as: UTF8.self))")
        #expect(await server.respond("GET", "/", headers: ["Host": "evil.example"]).status == 403)
    }
}
