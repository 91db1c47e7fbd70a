import Foundation
import HalcyonDashboard
import HalcyonTestSupport
import Testing

/// Sign-in's `next`: only a path on this site is followed, by the form (the hidden field the
/// page carries) and by the redirect after a sign-in; anything else — another host, a scheme,
/// what browsers read as `/` (a backslash, a tab or newline they drop), control characters, and
/// the same spelt with percent escapes — leads to `/`.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"))
struct DashboardSignInTests {
    static let refused = [
        "//evil.example", "//evil.example/x", "/\t/evil.example", "/\\evil.example", "/\\/evil.example", "https://evil.example",
        "http:/evil.example", "evil.example", "/\u{0}/evil.example", "/x\r\nSet-Cookie: a=b", "/jobs\u{7F}", "/jobs\u{85}",
        // Percent escapes of the same: a slash, a backslash, a tab, CR/LF, NUL; double escapes;
        // dot segments.
        "/%2F/evil.example", "/%2f%2fevil.example", "/%5Cevil.example", "/%5c/evil.example", "/%09/evil.example", "/%0D%0A/evil.example",
        "/%00", "%2F%2Fevil.example", "/%252F%252Fevil.example", "/jobs?next=%0D%0ALocation:%20https://evil.example",
        "/jobs?x=%00", "/jobs?x=%7f", "/jobs?x=%2", "/./evil.example", "/../evil.example", "/jobs/../..//evil.example",
    ]
    static let kept = ["/jobs?state=failed", "/jobs?state=failed&code=fetch.timeout", "/jobs/12", "/?q=%2F%2Fx", "/api/jobs?tag=a%20b"]

    @Test func nextLeadsOnlyToAPathOnThisSite() async throws {
        let f = try await DashboardFixture.forChanges.value
        let secret = "sign-in-token-sign-in-token-3"
        let server = try await f.server { $0.authToken = secret }
        defer { server.stop() }
        for next in Self.refused {
            let signedIn = try await HTTP.post(server, "/login", [("token", secret), ("next", next)])
            #expect(signedIn.status == 303 && signedIn.headers["location"] == "/", "\(next.debugDescription): \(signedIn.headers["location"] ?? "-")")
            let form = try await HTTP.get(server, "/login?next=\(HTMLPercent.encode(next))")
            #expect(form.status == 200 && form.text.contains("name=\"next\" value=\"/\""), "\(next.debugDescription)")
        }
        for next in Self.kept {
            let signedIn = try await HTTP.post(server, "/login", [("token", secret), ("next", next)])
            #expect(signedIn.headers["location"] == next, "\(next)")
            let form = try await HTTP.get(server, "/login?next=\(HTMLPercent.encode(next))")
            let escaped = next.replacingOccurrences(of: "&", with: "&amp;")
            #expect(form.text.contains("name=\"next\" value=\"\(escaped)\""), "\(next)")
        }
        // A page asked for before signing in is where the form leads.
        #expect(try await HTTP.get(server, "/jobs/12").headers["location"] == "/login?next=%2Fjobs%2F12")
    }
}
