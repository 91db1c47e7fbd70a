import Foundation
import HalcyonDashboard
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// The viewer token sees every page and the JSON API, and changes nothing: every retry and
/// cancel, single or bulk, by Bearer header or by a signed-in browser, is refused with 403 and
/// leaves the row as it was; the action buttons are not shown to it.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct DashboardRoleTests {
    let operatorToken = "operator-token-operator-token-1"
    let viewerToken = "viewer-token-viewer-token-2"

    /// A failed job of its own (`DashboardSecurityTests.failedJob`), or a queued one.
    func job(_ f: DashboardFixture, state: String) async throws -> Int64 {
        let id = try await DashboardSecurityTests().failedJob(f)
        if state == "queued" {
            try await f.db.query("UPDATE halcyon.jobs SET state = 'queued', finished_at = NULL WHERE id = $1::bigint", [String(id)])
        }
        return id
    }

    func row(_ f: DashboardFixture, _ id: Int64) async throws -> String? {
        try await f.value("SELECT state::text || ' ' || attempt || ' ' || run_at::text AS v FROM halcyon.jobs WHERE id = $1::bigint", [String(id)])
    }

    @Test func aViewerSeesEverythingAndChangesNothing() async throws {
        let f = try await DashboardFixture.forChanges.value
        let server = try await f.server {
            $0.authToken = operatorToken
            $0.viewerToken = viewerToken
        }
        defer { server.stop() }
        let failed = try await job(f, state: "failed"), queued = try await job(f, state: "queued")
        let (failedBefore, queuedBefore) = (try await row(f, failed), try await row(f, queued))
        let viewer = ["Authorization": "Bearer \(viewerToken)"]

        // Every page and the API.
        let api = try await HTTP.get(server, "/api/jobs", headers: viewer)
        #expect(api.status == 200 && JSONValue.parse(api.text)?["jobs"]?.arrayValue != nil, "\(api.status) \(api.text.prefix(300))")
        #expect(try await HTTP.get(server, "/api/jobs/\(failed)", headers: viewer).status == 200)
        #expect(try await HTTP.get(server, "/api/overview", headers: viewer).status == 200)
        #expect(try await HTTP.get(server, "/api/usage", headers: viewer).status == 200)
        #expect(try await HTTP.get(server, "/", headers: viewer).status == 200)
        let page = try await HTTP.get(server, "/jobs/\(failed)", headers: viewer)
        #expect(page.status == 200 && page.text.contains("fetch.http_status"))
        #expect(!page.text.contains("action=\"/jobs/\(failed)/retry\"") && HTTP.csrf(in: page.text) == nil, "no button, no form token for a viewer")
        let list = try await HTTP.get(server, "/jobs", headers: viewer)
        #expect(list.status == 200 && !list.text.contains("action=\"/jobs/retry\"") && !list.text.contains("action=\"/jobs/cancel\""))

        // No change, single or bulk: 403 and why; the rows stay as they were.
        for (target, fields) in [
            ("/jobs/\(failed)/retry", [(String, String)]()), ("/jobs/\(queued)/cancel", []), ("/jobs/retry", [("state", "failed")]),
            ("/jobs/cancel", [("state", "queued")]),
        ] {
            let r = try await HTTP.post(server, target, fields, headers: viewer)
            #expect(r.status == 403 && r.text.contains("viewer") && r.text.contains("--auth-token"), "\(target): \(r.status) \(r.text)")
        }
        #expect(try await row(f, failed) == failedBefore)
        #expect(try await row(f, queued) == queuedBefore)

        // Signed in with the viewer token: the same, even with a valid form token.
        let signedIn = try await HTTP.post(server, "/login", [("token", viewerToken), ("next", "/jobs/\(failed)")])
        #expect(signedIn.status == 303 && signedIn.headers["location"] == "/jobs/\(failed)")
        let session = String(try #require(signedIn.headers["set-cookie"]).prefix { $0 != ";" })
        let browser = try await HTTP.get(server, "/jobs/\(failed)", headers: ["Cookie": session])
        #expect(browser.status == 200 && !browser.text.contains("action=\"/jobs/\(failed)/retry\""))
        let operatorPage = try await HTTP.get(server, "/jobs/\(failed)", headers: ["Authorization": "Bearer \(operatorToken)"])
        let csrf = try #require(HTTP.csrf(in: operatorPage.text), "the operator's page has the buttons")
        #expect(try await HTTP.post(server, "/jobs/\(failed)/retry", [("csrf", csrf)], headers: ["Cookie": session]).status == 403)
        #expect(try await row(f, failed) == failedBefore)

        // The operator's token still acts.
        let retried = try await HTTP.post(server, "/jobs/\(failed)/retry", [], headers: ["Authorization": "Bearer \(operatorToken)"])
        #expect(retried.status == 303)
        #expect(try await f.value("SELECT state::text AS v FROM halcyon.jobs WHERE id = $1::bigint", [String(failed)]) == "queued")
    }

    @Test func theViewerTokenIsCheckedAtStart() async throws {
        var c = DashboardConfiguration()
        c.viewerToken = viewerToken
        #expect(c.problem?.contains("needs an operator token") == true, "a viewer token alone would leave loopback open to act")
        c.authToken = operatorToken
        #expect(c.problem == nil)
        c.viewerToken = "short"
        #expect(c.problem?.contains("at least 16") == true)
        c.viewerToken = operatorToken
        #expect(c.problem?.contains("must differ") == true)

        let f = try await DashboardFixture.forChanges.value
        let cli = try HalcyonProcess(
            ["dashboard", "--port", "0", "--auth-token", operatorToken, "--viewer-token", "short"], conninfo: f.db.conninfo)
        #expect(await cli.wait(timeout: 30) != 0)
        #expect(cli.output.contains("the viewer token has 5 characters"), "\(cli.output)")
    }
}
