import Foundation
import Synchronization

/// A minimal HTTP/1.1 server for GET requests: the worker's `/metrics` endpoint and the demo's
/// local origin. One request per connection (`Connection: close`); the accept loop runs on a
/// thread of its own and each connection on a thread of its own (at most
/// `maxConnections` at once; more are closed unanswered), never the cooperative pool.
///
/// Not Dispatch: on Linux `DispatchQueue.global()` runs about one item per core (measured here:
/// 10 one-second items took 5 s on 2 cores) and a private concurrent queue starts 3 threads
/// and adds about one a second, so a few slow clients held every other request back (a demo
/// fetch waited 15 s for its first byte).
public final class HTTPServer: Sendable {
    /// Connections served at once; each one's reads and writes time out after 5 s.
    public static let maxConnections = 64

    public struct Response: Sendable {
        public var status: Int
        public var contentType: String
        public var headers: [String: String]
        public var body: Data

        public init(status: Int, contentType: String = "text/plain; charset=utf-8", headers: [String: String] = [:], body: Data) {
            self.status = status
            self.contentType = contentType
            self.headers = headers
            self.body = body
        }

        public static func text(_ status: Int, _ text: String) -> Response {
            Response(status: status, body: Data(text.utf8))
        }
    }

    /// Answers a request: method (`GET`, `HEAD`, …) and target (path and query).
    public typealias Handler = @Sendable (_ method: String, _ target: String) -> Response

    /// The port listened on (the one the system chose when asked for 0).
    public let port: Int
    public let host: String
    private let fd: Int32
    private let stopped = CancellationFlag()
    private let closed = Mutex(false)
    private let active = ActiveConnections()
    private final class ActiveConnections: Sendable { let count = Atomic<Int>(0) }

    /// Listens on `host` (an IPv4 address; default loopback) and `port` (0: any free port).
    public init(host: String = "127.0.0.1", port: Int = 0, handler: @escaping Handler) throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            throw HalcyonError(.internal, "'\(host)' is not an IPv4 address")
        }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HalcyonError(.internal, "socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 128) == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw HalcyonError(.internal, "cannot listen on \(host):\(port): \(message)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.fd = fd
        self.host = host
        self.port = Int(UInt16(bigEndian: actual.sin_port))
        let stopped = self.stopped
        let active = self.active
        let thread = Thread {
            while !stopped.isCancelled {
                let client = accept(fd, nil, nil)
                if client < 0 {
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    return  // closed by stop()
                }
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                guard active.count.add(1, ordering: .relaxed).newValue <= Self.maxConnections else {
                    active.count.subtract(1, ordering: .relaxed)
                    close(client)
                    continue
                }
                let connection = Thread {
                    Self.serve(client, handler)
                    active.count.subtract(1, ordering: .relaxed)
                }
                connection.name = "halcyon.http.connection"
                connection.start()
            }
        }
        thread.name = "halcyon.http.\(self.port)"
        thread.start()
    }

    /// Stops accepting; requests in progress finish.
    public func stop() {
        stopped.cancel()
        let fd = self.fd
        closed.withLock { closed in
            guard !closed else { return }
            closed = true
            shutdown(fd, Int32(SHUT_RDWR))
            close(fd)
        }
    }

    deinit { stop() }

    private static func serve(_ client: Int32, _ handler: Handler) {
        defer { close(client) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // The request head, up to its blank line (16 KiB at most); a body is not read.
        var head = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while head.count < 16_384 {
            let n = chunk.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            head += chunk[0..<n]
            let end = head.count - 4
            if end >= 0, (max(0, end - n)...end).contains(where: { head[$0] == 13 && head[$0 + 1] == 10 && head[$0 + 2] == 13 && head[$0 + 3] == 10 })
            {
                break
            }
        }
        let line = String(decoding: head.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self).split(separator: " ")
        let response: Response
        if line.count >= 2 {
            response = handler(String(line[0]), String(line[1]))
        } else {
            response = .text(400, "bad request\n")
        }
        var text = "HTTP/1.1 \(response.status) \(reason(response.status))\r\nContent-Type: \(response.contentType)\r\n"
        text += "Content-Length: \(response.body.count)\r\nConnection: close\r\n"
        for (name, value) in response.headers.sorted(by: { $0.key < $1.key }) { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        var bytes = Data(text.utf8)
        if line.first != "HEAD" { bytes.append(response.body) }
        bytes.withUnsafeBytes { raw in
            var sent = 0
            while sent < raw.count {
                let n = send(client, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
                if n <= 0 { return }
                sent += n
            }
        }
    }

    private static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }
}
