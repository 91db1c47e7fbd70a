import Foundation
import HTTPTypes
import HalcyonRuntime
import HalcyonStore
import Hummingbird

/// Who may see the dashboard and change jobs through it.
///
/// - Without a token (loopback only): any local client, but only with a `Host` header naming
///   the loopback address or `localhost` — a page on another site that rebinds its DNS name to
///   127.0.0.1 is refused, so it cannot read job data or the form token — and never a request
///   that came through a proxy (`Forwarded`, `X-Forwarded-*`, `X-Real-IP`, `Via`): a reverse
///   proxy on the same machine connects from loopback and may pass `Host: 127.0.0.1`, which
///   would open a token-less dashboard to whoever reaches the proxy.
/// - With a token: an `Authorization: Bearer TOKEN` header, or the session cookie that
///   `POST /login` sets (HttpOnly, SameSite=Strict; its value is an HMAC of the token, so the
///   token itself is never stored in the browser). The operator token (`--auth-token`) may see
///   and act; the viewer token (`--viewer-token`), when there is one, may only see.
/// - Every state-changing request is a POST carrying the form token (`csrf` field or
///   `X-CSRF-Token` header), except one authorized by a Bearer header (which a browser never
///   sends on its own). A POST whose `Origin` is another site is refused either way.
///
/// It holds secrets (the tokens, the session values, the form token): `description` and its
/// mirror say only which are set.
struct DashboardSecurity: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// What a caller may do.
    enum Role: Sendable, Equatable {
        /// See everything, retry and cancel.
        case `operator`
        /// See everything, change nothing.
        case viewer
    }

    let token: String?
    let viewerToken: String?
    /// The form token: random per process (a restarted dashboard asks for a reload).
    let csrf: String
    let sessionValue: String?
    let viewerSessionValue: String?

    static let sessionCookie = "halcyon_session"

    init(token: String?, viewerToken: String? = nil) {
        self.token = token
        self.viewerToken = token == nil ? nil : viewerToken
        var random = SystemRandomNumberGenerator()
        let secret = (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }
        csrf = Digest.sha256Hex(secret)
        sessionValue = token.map { Digest.hmacSHA256Hex(key: Array($0.utf8), message: Array("halcyon-dashboard-session".utf8)) }
        viewerSessionValue = self.viewerToken.map {
            Digest.hmacSHA256Hex(key: Array($0.utf8), message: Array("halcyon-dashboard-viewer-session".utf8))
        }
    }

    var description: String {
        "DashboardSecurity(\(token == nil ? "no token" : viewerToken == nil ? "token set" : "token and viewer token set"))"
    }
    var debugDescription: String { description }
    var customMirror: Mirror { Mirror(self, children: ["redacted": true, "token": token != nil, "viewerToken": viewerToken != nil]) }

    enum Access: Equatable {
        /// Allowed as `role`; `bearer` when by the Authorization header (no form token needed).
        case allowed(Role, bearer: Bool)
        /// Not signed in: a browser is sent to `/login`, an API client gets 401.
        case signIn
        /// A Host this dashboard does not answer to (DNS rebinding).
        case wrongHost
        /// No token, and the request came through a proxy (the header that says so).
        case proxied(header: String)
    }

    /// Headers a proxy adds; any of them on a request means it did not come from this machine's
    /// own user directly. The first such name, lower-cased.
    static func proxyHeader(in headers: HTTPFields) -> String? {
        headers.map { $0.name.canonicalName }.sorted().first {
            $0 == "forwarded" || $0 == "via" || $0 == "x-real-ip" || $0.hasPrefix("x-forwarded-")
        }
    }

    /// The `Host` a request names (HTTP/1's first `Host` header is the request's authority);
    /// several are joined by ", ", which no check accepts.
    static func host(_ head: HTTPRequest) -> String? {
        let all = (head.authority.map { [$0] } ?? []) + head.headerFields[values: Self.hostField]
        return all.isEmpty ? nil : all.joined(separator: ", ")
    }

    /// Who sends the request `head` to the dashboard listening on `port`.
    func access(_ head: HTTPRequest, port: Int) -> Access {
        let headers = head.headerFields
        guard let token, let sessionValue else {
            if let header = Self.proxyHeader(in: headers) { return .proxied(header: header) }
            return Self.isLocalHost(Self.host(head), port: port) ? .allowed(.operator, bearer: false) : .wrongHost
        }
        if let auth = headers[.authorization], auth.lowercased().hasPrefix("bearer ") {
            let sent = String(auth.dropFirst(7)).trimmingCharacters(in: .whitespaces)
            if Self.constantTimeEqual(sent, token) { return .allowed(.operator, bearer: true) }
            if let viewerToken, Self.constantTimeEqual(sent, viewerToken) { return .allowed(.viewer, bearer: true) }
        }
        if let cookie = Self.cookie(Self.sessionCookie, in: headers[.cookie]) {
            if Self.constantTimeEqual(cookie, sessionValue) { return .allowed(.operator, bearer: false) }
            if let viewerSessionValue, Self.constantTimeEqual(cookie, viewerSessionValue) { return .allowed(.viewer, bearer: false) }
        }
        return .signIn
    }

    /// Whether a POST may change state: a Bearer request, or the form token from this process
    /// (`X-CSRF-Token`, or the form's `csrf` field), and never from another site's page. The
    /// caller's role is checked apart (`Role.viewer` changes nothing).
    func mayChange(_ head: HTTPRequest, form: [(name: String, value: String)], access: Access) -> Bool {
        let headers = head.headerFields
        if let origin = headers[.origin], origin != "null", let host = Self.host(head),
            origin.lowercased() != "http://\(host.lowercased())" && origin.lowercased() != "https://\(host.lowercased())"
        {
            return false
        }
        if headers[Self.secFetchSite]?.lowercased() == "cross-site" { return false }
        if case .allowed(_, bearer: true) = access { return true }
        let sent = headers[Self.csrfHeader] ?? form.last(where: { $0.name == "csrf" })?.value
        return sent.map { Self.constantTimeEqual($0, csrf) } ?? false
    }

    static let secFetchSite = HTTPField.Name("Sec-Fetch-Site")!
    /// A second `Host` header (HTTP/1's first one is the request's authority).
    static let hostField = HTTPField.Name("Host")!
    static let csrfHeader = HTTPField.Name("X-CSRF-Token")!

    /// The role whose token `candidate` is (the login form), or nil.
    func signIn(with candidate: String) -> Role? {
        guard let token else { return nil }
        if Self.constantTimeEqual(candidate, token) { return .operator }
        if let viewerToken, Self.constantTimeEqual(candidate, viewerToken) { return .viewer }
        return nil
    }

    /// The `Set-Cookie` value that signs a browser in as `role`.
    func sessionCookieHeader(for role: Role) -> String? {
        (role == .operator ? sessionValue : viewerSessionValue).map { "\(Self.sessionCookie)=\($0); Path=/; HttpOnly; SameSite=Strict" }
    }

    /// Headers on every response: no framing, no sniffing, no referrer, scripts and styles from
    /// this origin only (the pages have no inline script or style).
    static let headers: [(HTTPField.Name, String)] = [
        (
            HTTPField.Name("Content-Security-Policy")!,
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        ),
        (HTTPField.Name("X-Content-Type-Options")!, "nosniff"),
        (HTTPField.Name("X-Frame-Options")!, "DENY"),
        (HTTPField.Name("Referrer-Policy")!, "no-referrer"),
    ]

    static func isLocalHost(_ host: String?, port: Int) -> Bool {
        guard let host = host?.lowercased() else { return false }
        let name: Substring, hostPort: Substring?
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            name = host[host.index(after: host.startIndex)..<close]
            let rest = host[host.index(after: close)...]
            hostPort = rest.hasPrefix(":") ? rest.dropFirst() : (rest.isEmpty ? nil : "x")
        } else {
            let parts = host.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            name = parts[0]
            hostPort = parts.count > 1 ? parts[1] : nil
        }
        guard hostPort == nil || hostPort.flatMap({ Int($0) }) == port else { return false }
        return name == "localhost" || name == "::1" || DashboardConfiguration.isLoopback(name)
    }

    static func cookie(_ name: String, in header: String?) -> String? {
        guard let header else { return nil }
        for part in header.split(separator: ";") {
            let kv = part.split(separator: "=", maxSplits: 1)
            if kv.count == 2, kv[0].trimmingCharacters(in: .whitespaces) == name { return kv[1].trimmingCharacters(in: .whitespaces) }
        }
        return nil
    }

    /// Compares without stopping at the first difference (timing reveals nothing of the secret).
    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var diff = UInt8(x.count == y.count ? 0 : 1)
        for i in 0..<max(x.count, y.count) { diff |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0) }
        return diff == 0
    }
}
