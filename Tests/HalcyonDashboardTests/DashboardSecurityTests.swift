import Foundation
import HalcyonDashboard
import HalcyonHTTP
import HalcyonQueue
import HalcyonTestSupport
import Testing

/// Who may look and who may change: the token, the form token (CSRF), the Host check, bounds.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct DashboardSecurityTests {
    /// A failed job of its own, for a test that changes it.
    func failedJob(_ f: DashboardFixture, queue: String = "default") async throws -> Int64 {
        let r = try await f.db.query(
            """
            INSERT INTO halcyon.jobs (source, queue, state, attempt, finished_at, errors, last_error)
            VALUES ('https://example.com/a.jpg', $1, 'failed', 1, now(), '[{"code":"fetch.http_status","message":"404"}]', 'fetch.http_status: 404')
            RETURNING id
            """, [queue])
        return Int64(try #require(r.value(0, "id")))!
    }

    func state(_ f: DashboardFixture, _ id: Int64) async throws -> String? {
        try await f.value("SELECT state::text AS v FROM halcyon.jobs WHERE id = $1::bigint", [String(id)])
    }

    @Test func retryAndCancelNeedTheFormToken() async throws {
        let f = try await DashboardFixture.forChanges.value
        let server = try await f.server()
        defer { server.stop() }
        let id = try await failedJob(f)
        let page = try await HTTP.get(server, "/jobs/\(id)")
        let token = try #require(HTTP.csrf(in: page.text))

        #expect(try await HTTP.post(server, "/jobs/\(id)/retry", []).status == 403, "no token")
        #expect(try await HTTP.post(server, "/jobs/\(id)/retry", [("csrf", String(repeating: "0", count: 64))]).status == 403, "a wrong token")
        #expect(try await HTTP.post(server, "/jobs/\(id)/retry", [("csrf", token)], headers: ["Origin": "http://evil.example"]).status == 403)
        #expect(try await HTTP.post(server, "/jobs/\(id)/retry", [("csrf", token)], headers: ["Sec-Fetch-Site": "cross-site"]).status == 403)
        #expect(try await HTTP.request(port: server.port, "GET", "/jobs/\(id)/retry").status == 404, "a GET changes nothing")
        #expect(try await state(f, id) == "failed")

        let retried = try await HTTP.post(server, "/jobs/\(id)/retry", [("csrf", token)], headers: ["Origin": "http://127.0.0.1:\(server.port)"])
        #expect(retried.status == 303 && retried.headers["location"] == "/jobs/\(id)?done=retried&n=1")
        #expect(try await state(f, id) == "queued")
        #expect(try await HTTP.get(server, "/jobs/\(id)?done=retried&n=1").text.contains("Retried 1 job."))
        let cancelled = try await HTTP.post(server, "/jobs/\(id)/cancel", [("csrf", token)])
        #expect(cancelled.status == 303)
        #expect(try await state(f, id) == "cancelled")
        // A token from another dashboard process is refused.
        let other = try await f.server()
        defer { other.stop() }
        #expect(try await HTTP.post(other, "/jobs/\(id)/retry", [("csrf", token)]).status == 403)
    }

    @Test func bulkRetryActsOnTheFilter() async throws {
        let f = try await DashboardFixture.forChanges.value
        let server = try await f.server()
        defer { server.stop() }
        let queue = "bulk-\(UUID().uuidString.prefix(8).lowercased())"
        let a = try await failedJob(f, queue: queue), b = try await failedJob(f, queue: queue)
        let untouched = try await failedJob(f)
        let token = try #require(HTTP.csrf(in: try await HTTP.get(server, "/jobs?queue=\(queue)").text))
        let r = try await HTTP.post(server, "/jobs/retry", [("csrf", token), ("state", "failed"), ("queue", queue)])
        #expect(r.status == 303 && r.headers["location"]?.contains("done=retried&n=2") == true, "\(r.headers)")
        #expect(try await state(f, a) == "queued")
        #expect(try await state(f, b) == "queued")
        #expect(try await state(f, untouched) == "failed", "a job outside the filter")
        #expect(try await HTTP.post(server, "/jobs/retry", [("csrf", token), ("state", "bogus")]).status == 400)
    }

    @Test func aTokenGuardsEveryPageAndAction() async throws {
        let f = try await DashboardFixture.forChanges.value
        let secret = "correct-horse-battery-staple-42"
        let server = try await f.server { $0.authToken = secret }
        defer { server.stop() }
        let anonymous = try await HTTP.get(server, "/jobs/\(f.photo)")
        #expect(anonymous.status == 303 && anonymous.headers["location"] == "/login?next=%2Fjobs%2F\(f.photo)")
        #expect(try await HTTP.get(server, "/api/overview").status == 401)
        #expect(try await HTTP.get(server, "/results/\(String(repeating: "a", count: 64))").status == 303)
        #expect(try await HTTP.get(server, "/", headers: ["Authorization": "Bearer wrong-token-wrong-token"]).status == 303)
        #expect(try await HTTP.get(server, "/api/overview", headers: ["Authorization": "Bearer \(secret)"]).status == 200)
        // Any Host is fine with a token (a reverse proxy's name).
        #expect(try await HTTP.get(server, "/", headers: ["Authorization": "Bearer \(secret)"], host: "halcyon.internal").status == 200)

        let wrong = try await HTTP.post(server, "/login", [("token", "not-it"), ("next", "/jobs")])
        #expect(wrong.status == 401 && wrong.headers["set-cookie"] == nil)
        let signedIn = try await HTTP.post(server, "/login", [("token", secret), ("next", "/jobs")])
        #expect(signedIn.status == 303 && signedIn.headers["location"] == "/jobs")
        let cookie = try #require(signedIn.headers["set-cookie"])
        #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && !cookie.contains(secret))
        let session = String(cookie.prefix { $0 != ";" })
        let page = try await HTTP.get(server, "/jobs/\(f.missing)", headers: ["Cookie": session])
        #expect(page.status == 200)
        // No open redirect after sign-in: anything but a same-origin path goes to /. Browsers drop
        // tabs and newlines and read \ as /, so each of these would otherwise leave the site.
        for next in [
            "//evil.example/", "/\tevil.example/x", "/\t/evil.example/x", "/\n/evil.example", "/\\evil.example", "/\\/evil.example",
            "https://evil.example/", "evil.example", "/ /evil.example", "/%09/evil.example\t", "javascript:alert(1)",
        ] {
            #expect(
                try await HTTP.post(server, "/login", [("token", secret), ("next", next)]).headers["location"] == "/", "\(next.debugDescription)")
        }
        for next in ["/jobs?state=failed&code=fetch.timeout", "/jobs/12", "/?q=%2F%2Fx"] {
            #expect(try await HTTP.post(server, "/login", [("token", secret), ("next", next)]).headers["location"] == next, "\(next)")
        }

        let id = try await failedJob(f)
        #expect(
            try await HTTP.post(server, "/jobs/\(id)/retry", [], headers: ["Cookie": session]).status == 403, "a cookie alone does not change state")
        #expect(try await HTTP.post(server, "/jobs/\(id)/retry", []).status == 401)
        let token = try #require(HTTP.csrf(in: page.text))
        #expect(try await HTTP.post(server, "/jobs/\(id)/retry", [("csrf", token)], headers: ["Cookie": session]).status == 303)
        #expect(try await state(f, id) == "queued")
        try await f.db.query("UPDATE halcyon.jobs SET state = 'failed', finished_at = now() WHERE id = $1::bigint", [String(id)])
        #expect(
            try await HTTP.post(server, "/jobs/\(id)/retry", [], headers: ["Authorization": "Bearer \(secret)"]).status == 303,
            "an API client with the token")
        #expect(try await state(f, id) == "queued")
    }

    @Test func withoutATokenOnlyLoopbackNamesAreAnswered() async throws {
        let f = try await DashboardFixture.forChanges.value
        let server = try await f.server()
        defer { server.stop() }
        for host in ["127.0.0.1:\(server.port)", "localhost:\(server.port)", "LOCALHOST", "[::1]:\(server.port)"] {
            #expect(try await HTTP.get(server, "/", host: host).status == 200, "\(host)")
        }
        for host in ["evil.example:\(server.port)", "evil.example", "127.0.0.1:1", "10.0.0.1:\(server.port)", ""] {
            let r = try await HTTP.get(server, "/api/jobs", host: host)
            #expect(r.status == 403 && !r.text.contains("\"jobs\""), "\(host) (DNS rebinding)")
        }
    }

    /// A reverse proxy on this machine connects from loopback and may forward `Host: 127.0.0.1`
    /// (nginx's default `proxy_set_header Host $proxy_host`): without a token, a request carrying
    /// any header a proxy adds is refused with the reason, pages and API alike.
    @Test func withoutATokenAProxiedRequestIsRefused() async throws {
        let f = try await DashboardFixture.forChanges.value
        let server = try await f.server()
        defer { server.stop() }
        for (name, value) in [
            ("X-Forwarded-For", "203.0.113.9"), ("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "halcyon.example"),
            ("Forwarded", "for=203.0.113.9"), ("X-Real-IP", "203.0.113.9"), ("Via", "1.1 nginx"),
        ] {
            for path in ["/", "/api/jobs", "/jobs"] {
                let r = try await HTTP.get(server, path, headers: [name: value], host: "127.0.0.1:\(server.port)")
                #expect(r.status == 403 && r.text.contains("--auth-token") && !r.text.contains("\"jobs\""), "\(name) \(path): \(r.status)")
            }
        }
        #expect(try await HTTP.get(server, "/", host: "127.0.0.1:\(server.port)").status == 200, "a direct local request still is")
        // With a token, a proxy is fine: the token is what is checked.
        let secret = String(repeating: "s", count: 24)
        let tokened = try await f.server { $0.authToken = secret }
        defer { tokened.stop() }
        let r = try await HTTP.get(
            tokened, "/api/overview", headers: ["Authorization": "Bearer \(secret)", "X-Forwarded-For": "203.0.113.9"], host: "halcyon.example")
        #expect(r.status == 200)
    }

    @Test func anAddressOtherThanLoopbackNeedsAToken() async throws {
        var c = DashboardConfiguration()
        c.address = "0.0.0.0"
        #expect(c.problem?.contains("--auth-token") == true)
        c.authToken = "short"
        #expect(c.problem?.contains("at least 16") == true)
        c.authToken = String(repeating: "k", count: 16)
        #expect(c.problem == nil)
        c.address = "not-an-address"
        #expect(c.problem != nil)

        let f = try await DashboardFixture.forChanges.value
        await #expect(throws: (any Error).self) { _ = try await f.server { $0.address = "0.0.0.0" } }
        let cli = try HalcyonProcess(
            ["dashboard", "--address", "0.0.0.0", "--port", "0"], conninfo: f.db.conninfo, environment: ["HALCYON_DASHBOARD_TOKEN": ""])
        #expect(await cli.wait(timeout: 30) != 0)
        #expect(cli.output.contains("needs --auth-token or HALCYON_DASHBOARD_TOKEN"), "\(cli.output)")
    }

    @Test func requestsOverTheirBoundsAreRefused() async throws {
        let f = try await DashboardFixture.forChanges.value
        let server = try await f.server()
        defer { server.stop() }
        let big = try await HTTP.request(
            port: server.port, "POST", "/jobs/retry", headers: ["Content-Type": "application/x-www-form-urlencoded"],
            body: Data(repeating: 0x61, count: DashboardConfiguration().http.maxBodyBytes + 1))
        #expect(big.status == 413)
        let hugeHead = try await HTTP.get(server, "/", headers: ["X-Filler": String(repeating: "x", count: 20_000)])
        #expect(hugeHead.status == 431)
        #expect(try await HTTP.request(port: server.port, "DELETE", "/jobs/1").status == 405)
        let chunked = try await HTTP.request(port: server.port, "POST", "/jobs/1/retry", headers: ["Transfer-Encoding": "chunked"])
        #expect(chunked.status == 411, "\(chunked.status) \(String(decoding: chunked.body, as: UTF8.self))")
        // Still serving.
        #expect(try await HTTP.get(server, "/").status == 200)
    }
}
