import Foundation
import HalcyonCore
import HalcyonQueue

/// How `halcyon dashboard` serves. Defaults: loopback, port 8080, no token, pages refreshed
/// every 5 s in the browser.
public struct DashboardConfiguration: Sendable {
    /// IPv4 address to listen on. Anything outside 127.0.0.0/8 requires `authToken`.
    public var address = "127.0.0.1"
    /// TCP port; 0 picks a free one.
    public var port = 8080
    /// A shared secret (at least `minimumTokenLength` characters): with it, every request must
    /// carry it as `Authorization: Bearer …` or the session cookie `/login` sets.
    public var authToken: String?
    /// The store whose results `/results/SHA256` serves; nil serves none.
    public var storeRoot: URL?
    /// How often a page with live parts reloads them (JavaScript; without it, pages are static).
    public var liveInterval: Duration = .seconds(5)
    /// A worker without a heartbeat this long is shown as dead.
    public var deadAfter: Duration = .seconds(60)
    /// Jobs per page of the list.
    public var pageSize = 50
    /// Counts stop here and say "N+" (the overview's per-state counts, the list's match count).
    public var countCap = QueueOverview.defaultCap
    /// The database statement deadline (a pathological filter is cut off here).
    public var statementTimeout: Duration = .seconds(10)
    /// Database connections; requests share them.
    public var connections = 3
    /// A result larger than this is not served.
    public var maxResultBytes = 64 << 20

    public static let minimumTokenLength = 16

    public init() {}

    /// Whether `address` is a loopback address (127.0.0.0/8).
    public var isLoopback: Bool { Self.isLoopback(address) }

    /// Whether `text` is an IPv4 address in 127.0.0.0/8.
    static func isLoopback(_ text: some StringProtocol) -> Bool {
        var a = in_addr()
        return inet_pton(AF_INET, String(text), &a) == 1 && (UInt32(bigEndian: a.s_addr) >> 24) == 127
    }

    /// What would be unsafe or cannot work, or nil: a non-loopback address without a token, a
    /// short token, a bad port, page size or cap.
    public var problem: String? {
        var a = in_addr()
        guard inet_pton(AF_INET, address, &a) == 1 else { return "--address '\(address)' is not an IPv4 address" }
        guard (0...65535).contains(port) else { return "--port \(port) is not a TCP port" }
        if let authToken, authToken.count < Self.minimumTokenLength {
            return "the auth token has \(authToken.count) characters; at least \(Self.minimumTokenLength) are required"
        }
        if !isLoopback && authToken == nil {
            return "listening on \(address) (not loopback) needs --auth-token or HALCYON_DASHBOARD_TOKEN: "
                + "anyone who can reach the port could see every job and retry or cancel them"
        }
        guard (1...500).contains(pageSize) else { return "--page-size must be 1–500" }
        guard countCap >= 1, connections >= 1, maxResultBytes >= 1 else { return "caps and connection counts must be positive" }
        return nil
    }
}
