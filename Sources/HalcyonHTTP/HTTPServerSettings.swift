import Foundation
import HalcyonDomain

/// Where one of Halcyon's HTTP servers listens and what it accepts (the dashboard, a worker's
/// `/metrics` and `/healthz`, the demo's origin). The defaults are what each of them uses.
///
/// Slow clients cannot hold a server: a request must arrive whole within `requestTimeout` of its
/// first byte (not per read: a client trickling a byte a second is answered 408 and closed), a
/// kept-alive connection without a request is closed after `idleTimeout`, and at
/// `maxConnections` a new connection makes room by closing the one that has waited longest for
/// its request. None of it costs a thread: connections are served by SwiftNIO's event loops.
public struct HTTPServerSettings: Sendable, Equatable {
    /// IPv4 address to listen on. Default: `defaultAddress`.
    public var address: String
    /// TCP port, one of `ports`; 0 (the default) lets the system pick a free one (`ListeningPort`
    /// tells which).
    public var port: Int
    /// The request line and header fields, at most (`431` beyond). Default: `Settings.maxHeadBytes`.
    public var maxHeadBytes = Settings.maxHeadBytes.defaultValue
    /// A request body, at most. A larger `Content-Length` is refused before the body is read
    /// (`413`); a body without one (`Transfer-Encoding: chunked`) is refused with `411`. Default:
    /// `Settings.maxBodyBytes`.
    public var maxBodyBytes = Settings.maxBodyBytes.defaultValue
    /// Time for a whole request (head and body) to arrive, from its first byte (`408`, and the
    /// connection is closed). Default: `Settings.requestTimeout`.
    public var requestTimeout = Settings.requestTimeout.defaultValue
    /// A kept-alive connection with no request in progress is closed after this. Default:
    /// `Settings.idleTimeout`.
    public var idleTimeout = Settings.idleTimeout.defaultValue
    /// Connections at once. One more closes the connection that has waited longest for its
    /// request (one being answered is never closed for it); when every one is being answered,
    /// the new connection is closed. Default: `Settings.maxConnections`.
    public var maxConnections = Settings.maxConnections.defaultValue
    /// The option that set `port` (`--metrics-port`, `--port`), which a port that cannot be bound
    /// is reported under; nil: "port N".
    public var portOption: String?

    /// Where a server listens unless told otherwise: loopback only.
    public static let defaultAddress = "127.0.0.1"
    /// TCP ports.
    public static let ports = 0...65535
    /// The dashboard's port unless told otherwise (`halcyon dashboard --port`); here, not in the
    /// dashboard's module, so that the demo's hint (which does not link the dashboard) says it too.
    public static let dashboardPort = 8080

    /// Each limit's default and accepted values, said once: the properties start from these and
    /// `validate()` checks them (its messages name the limit and state the range).
    public enum Settings {
        public static let maxHeadBytes = Setting.bytes(
            "the head limit", default: 16 << 10, (1 << 10)...(1 << 20), "The request line and header fields, at most")
        public static let maxBodyBytes = Setting.bytes("the body limit", default: 64 << 10, 0...(64 << 20), "A request body, at most")
        public static let requestTimeout = Setting.duration(
            "the request timeout", default: .seconds(5), .milliseconds(100)...(.seconds(600)),
            "Time for a whole request to arrive, from its first byte")
        public static let idleTimeout = Setting.duration(
            "the idle timeout", default: .seconds(15), .milliseconds(100)...(.seconds(3600)),
            "A kept-alive connection with no request in progress is closed after this")
        public static let maxConnections = Setting.count("the connection limit", default: 64, 1...100_000, "Connections at once")
    }

    public init(address: String = defaultAddress, port: Int = 0, portOption: String? = nil) {
        self.address = address
        self.port = port
        self.portOption = portOption
    }

    /// Checks every value; the error names the first that cannot work.
    public func validate() throws(HalcyonError) {
        var a = in_addr()
        guard inet_pton(AF_INET, address, &a) == 1 else { throw HalcyonError(.invalidOptions, "'\(address)' is not an IPv4 address") }
        guard Self.ports.contains(port) else { throw HalcyonError(.invalidOptions, "port \(port) is not a TCP port") }
        try Settings.maxHeadBytes.check(maxHeadBytes)
        try Settings.maxBodyBytes.check(maxBodyBytes)
        try Settings.requestTimeout.check(requestTimeout)
        try Settings.idleTimeout.check(idleTimeout)
        try Settings.maxConnections.check(maxConnections)
    }
}
