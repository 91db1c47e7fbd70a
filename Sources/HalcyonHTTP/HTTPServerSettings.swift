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
    /// IPv4 address to listen on. Default `127.0.0.1`.
    public var address: String
    /// TCP port; 0 (the default) lets the system pick a free one (`ListeningPort` tells which).
    public var port: Int
    /// The request line and header fields, at most: 16 KiB (`431` beyond).
    public var maxHeadBytes = 16_384
    /// A request body, at most: 64 KiB. A larger `Content-Length` is refused before the body is
    /// read (`413`); a body without one (`Transfer-Encoding: chunked`) is refused with `411`.
    public var maxBodyBytes = 65_536
    /// Time for a whole request (head and body) to arrive, from its first byte: 5 s (`408`, and
    /// the connection is closed).
    public var requestTimeout: Duration = .seconds(5)
    /// A kept-alive connection with no request in progress is closed after this: 15 s.
    public var idleTimeout: Duration = .seconds(15)
    /// Connections at once: 64. One more closes the connection that has waited longest for its
    /// request (one being answered is never closed for it); when every one is being answered,
    /// the new connection is closed.
    public var maxConnections = 64
    /// The option that set `port` (`--metrics-port`, `--port`), which a port that cannot be bound
    /// is reported under; nil: "port N".
    public var portOption: String?

    public init(address: String = "127.0.0.1", port: Int = 0, portOption: String? = nil) {
        self.address = address
        self.port = port
        self.portOption = portOption
    }

    /// Checks every value; the error names the first that cannot work.
    public func validate() throws(HalcyonError) {
        var a = in_addr()
        guard inet_pton(AF_INET, address, &a) == 1 else { throw HalcyonError(.invalidOptions, "'\(address)' is not an IPv4 address") }
        guard (0...65535).contains(port) else { throw HalcyonError(.invalidOptions, "port \(port) is not a TCP port") }
        guard (1024...(1 << 20)).contains(maxHeadBytes) else { throw HalcyonError(.invalidOptions, "the head limit must be 1 KiB–1 MiB") }
        guard (0...(64 << 20)).contains(maxBodyBytes) else { throw HalcyonError(.invalidOptions, "the body limit must be 0–64 MiB") }
        guard requestTimeout >= .milliseconds(100), requestTimeout <= .seconds(600) else {
            throw HalcyonError(.invalidOptions, "the request timeout must be 100 ms–10 min")
        }
        guard idleTimeout >= .milliseconds(100), idleTimeout <= .seconds(3600) else {
            throw HalcyonError(.invalidOptions, "the idle timeout must be 100 ms–1 h")
        }
        guard (1...100_000).contains(maxConnections) else { throw HalcyonError(.invalidOptions, "the connection limit must be 1–100000") }
    }
}
