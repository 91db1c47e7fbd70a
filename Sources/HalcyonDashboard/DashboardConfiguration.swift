import Foundation
import HalcyonDomain
import HalcyonHTTP
import HalcyonQueue
import HalcyonRuntime
import HalcyonS3
import HalcyonStore

/// How `halcyon dashboard` serves. Defaults: loopback, no token, `Settings` (port, refresh,
/// results streamed at once) and `HTTPServerSettings`' limits (bodies, heads, the time for a
/// request to arrive whole, connections). Its tokens are never shown: `description` and its
/// mirror (what `dump` and reflection print) say only whether each is set.
public struct DashboardConfiguration: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// IPv4 address to listen on. Anything outside 127.0.0.0/8 requires `authToken`.
    public var address = Self.defaultAddress
    /// Loopback, as every HTTP server here (`halcyon dashboard --address` starts from it).
    public static let defaultAddress = HTTPServerSettings.defaultAddress
    /// TCP port; 0 picks a free one.
    public var port = Settings.port.defaultValue
    /// The operator's shared secret (at least `minimumTokenLength` characters): with it, every
    /// request must carry a token as `Authorization: Bearer …` or the session cookie `/login`
    /// sets, and this one may also retry and cancel.
    public var authToken: String?
    /// A second secret, for viewers: every page and the JSON API, but no retry or cancel (403).
    /// Needs `authToken`, and must differ from it.
    public var viewerToken: String?
    /// The store whose results `/results/SHA256` serves (a directory or a bucket; either way
    /// streamed a chunk at a time, bounded by `maxResultBytes`); nil serves none.
    public var store: StoreLocation?

    /// The store as a directory (nil for none, or for a bucket).
    public var storeRoot: URL? {
        get { store?.directory }
        set { store = newValue.map { .directory($0) } }
    }
    /// How often a page with live parts reloads them (JavaScript; without it, pages are static).
    public var liveInterval: Duration = Settings.liveInterval.defaultValue
    /// A worker without a heartbeat this long is shown as dead.
    public var deadAfter: Duration = .seconds(60)
    /// Jobs per page of the list.
    public var pageSize = Settings.pageSize.defaultValue
    /// Where a job's trace is shown, `{trace_id}` standing for its trace id (your tracing UI's
    /// trace page, e.g. `https://jaeger.example.com/trace/{trace_id}`): a job enqueued with a
    /// traceparent links there. Nil: the trace id is shown as text.
    public var traceURL: String?
    /// Counts stop here and say "N+" (the overview's per-state counts, the list's match count).
    public var countCap = QueueOverview.defaultCap
    /// The database statement deadline (a pathological filter is cut off here).
    public var statementTimeout: Duration = Settings.statementTimeout.defaultValue
    /// Database connections; requests share them.
    public var connections = 3
    /// A result larger than this is not served.
    public var maxResultBytes = 64 << 20
    /// Results being sent at once, at most; one more is answered `503` with `Retry-After`. Each
    /// is sent a chunk at a time, so this bounds the memory results take (see `ResultStreams`).
    public var maxResultStreams = Settings.maxResultStreams.defaultValue
    /// A result stream whose client has taken nothing for this long (one chunk not accepted by
    /// the connection) is ended and its connection closed, so clients that stop reading cannot
    /// hold every stream.
    public var resultStallTimeout: Duration = .seconds(60)
    /// The HTTP server's limits and timeouts (`address` and `port` above take precedence over
    /// the ones here). Default: `HTTPServerSettings()`'s (a form post of at most its `maxBodyBytes`).
    public var http = HTTPServerSettings()

    public static let minimumTokenLength = 16

    public init() {}

    public var description: String {
        let tokens = authToken == nil ? "no token" : viewerToken == nil ? "token set" : "token and viewer token set"
        return "DashboardConfiguration(\(address):\(port), \(tokens), store: \(store?.description ?? "none"))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "address": address, "port": port, "authToken": authToken == nil ? "none" : "redacted",
                "viewerToken": viewerToken == nil ? "none" : "redacted", "store": store as Any, "liveInterval": liveInterval,
                "deadAfter": deadAfter, "pageSize": pageSize, "countCap": countCap, "statementTimeout": statementTimeout,
                "connections": connections, "maxResultBytes": maxResultBytes, "maxResultStreams": maxResultStreams,
                "resultStallTimeout": resultStallTimeout, "http": http, "traceURL": traceURL as Any,
            ])
    }

    /// The settings `halcyon dashboard` exposes, each described once (option, default, accepted
    /// values, meaning); `validate()` checks them.
    public enum Settings {
        public static let port = Setting.count(
            "--port", default: HTTPServerSettings.dashboardPort, HTTPServerSettings.ports, "TCP port", detail: "0: any free port, printed at start.")
        public static let liveInterval = Setting.duration(
            "--refresh", default: .seconds(5), .zero...(.hours(1)), "How often open pages refresh their live parts (0s: never)")
        public static let pageSize = Setting.count("--page-size", default: 50, 1...500, "Jobs per page of the list")
        public static let statementTimeout = Setting.duration(
            "--statement-timeout", default: .seconds(10), .seconds(1)...(.minutes(10)), "Deadline of every dashboard statement")
        public static let maxResultStreams = Setting.count(
            "--max-result-streams", default: 48, 1...63, "Results sent at once, at most (one more is answered 503 with Retry-After)",
            detail: "Each is read and sent a chunk at a time, so this bounds the memory results take; "
                + "below the server's \(HTTPServerSettings.Settings.maxConnections.defaultValue) connections, so pages are answered meanwhile.")
    }

    /// Checks the settings and what would be unsafe (`problem`), as `job.invalid_options`
    /// naming the option; `DashboardServer` calls it before it serves.
    public func validate() throws(HalcyonError) {
        if case .objectStore(let s3)? = store { try s3.validate() }
        try Settings.port.check(port)
        try Settings.liveInterval.check(liveInterval)
        try Settings.pageSize.check(pageSize)
        try Settings.statementTimeout.check(statementTimeout)
        try Settings.maxResultStreams.check(maxResultStreams)
        if let problem { throw HalcyonError(.invalidOptions, problem) }
    }

    /// Why `url` cannot be a `--trace-url`, or nil: an http(s) URL of at most 2,048 bytes, with a
    /// host, holding `{trace_id}`.
    static func traceURLProblem(_ url: String) -> String? {
        let lower = url.lowercased()
        guard url.utf8.count <= 2048, lower.hasPrefix("http://") || lower.hasPrefix("https://"), url.contains(Self.traceIDPlaceholder),
            let parsed = URL(string: url.replacingOccurrences(of: Self.traceIDPlaceholder, with: "0")), parsed.host?.isEmpty == false
        else {
            return "--trace-url must be an http(s) URL of at most 2048 bytes holding {trace_id}, e.g. https://jaeger.example.com/trace/{trace_id}"
        }
        return nil
    }

    /// What `traceURL` holds in place of a trace id.
    public static let traceIDPlaceholder = "{trace_id}"

    /// The trace page of `traceID` (32 hex digits, which the table guarantees), or nil without a
    /// `traceURL`.
    func traceLink(_ traceID: String) -> String? {
        traceURL.map { $0.replacingOccurrences(of: Self.traceIDPlaceholder, with: traceID) }
    }

    /// Whether `address` is a loopback address (127.0.0.0/8).
    public var isLoopback: Bool { Self.isLoopback(address) }

    /// Whether `text` is an IPv4 address in 127.0.0.0/8.
    static func isLoopback(_ text: some StringProtocol) -> Bool {
        var a = in_addr()
        return inet_pton(AF_INET, String(text), &a) == 1 && (UInt32(bigEndian: a.s_addr) >> 24) == 127
    }

    /// The server's settings: `http` with this configuration's address and port.
    public var serverSettings: HTTPServerSettings {
        var settings = http
        settings.address = address
        settings.port = port
        settings.portOption = Settings.port.option
        return settings
    }

    /// What would be unsafe or cannot work, or nil: a non-loopback address without a token, a
    /// short token, a viewer token without an operator token or equal to it, a cap or server
    /// limit (the `Settings` are checked by `validate()`).
    public var problem: String? {
        var a = in_addr()
        guard inet_pton(AF_INET, address, &a) == 1 else { return "--address '\(address)' is not an IPv4 address" }
        if let traceURL, let problem = Self.traceURLProblem(traceURL) { return problem }
        if let authToken, authToken.count < Self.minimumTokenLength {
            return "the auth token has \(authToken.count) characters; at least \(Self.minimumTokenLength) are required"
        }
        if let viewerToken {
            guard viewerToken.count >= Self.minimumTokenLength else {
                return "the viewer token has \(viewerToken.count) characters; at least \(Self.minimumTokenLength) are required"
            }
            guard authToken != nil else {
                return
                    "a viewer token needs an operator token too (--auth-token or HALCYON_DASHBOARD_TOKEN): without one, anyone on this machine could act"
            }
            guard viewerToken != authToken else { return "the viewer token must differ from the auth token" }
        }
        if !isLoopback && authToken == nil {
            return "listening on \(address) (not loopback) needs --auth-token or HALCYON_DASHBOARD_TOKEN: "
                + "anyone who can reach the port could see every job and retry or cancel them"
        }
        guard countCap >= 1, connections >= 1, maxResultBytes >= 1 else { return "caps and connection counts must be positive" }
        guard maxResultStreams < http.maxConnections else {
            return
                "--max-result-streams (\(maxResultStreams)) must be below the server's \(http.maxConnections) connections, so pages are answered while results stream"
        }
        guard resultStallTimeout > .zero else { return "the result stall timeout must be positive" }
        do { try serverSettings.validate() } catch { return error.message }
        return nil
    }
}
