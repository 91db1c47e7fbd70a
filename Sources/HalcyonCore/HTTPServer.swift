import Foundation
import Synchronization

/// A minimal HTTP/1.1 server: the worker's `/metrics` endpoint, the demo's local origin and the
/// operators' dashboard. Requests carry their headers and, up to `maxBodyBytes`, a
/// `Content-Length` body (a form post); chunked bodies are refused. One request per
/// connection (`Connection: close`); the accept loop runs on a
/// thread of its own and each connection on a thread of its own, never the cooperative pool.
///
/// Slow clients cannot hold it: a request must arrive whole within `requestTimeout` of its
/// connection (not per read: a client trickling a byte a second is cut off, answered 408), and
/// at `maxConnections` a new connection makes room by closing the one that has waited longest
/// for its request to arrive — so 64 connections that trickle bytes delay a normal request by
/// no more than it takes to close one of them.
///
/// Not Dispatch: on Linux `DispatchQueue.global()` runs about one item per core (measured here:
/// 10 one-second items took 5 s on 2 cores) and a private concurrent queue starts 3 threads
/// and adds about one a second, so a few slow clients held every other request back (a demo
/// fetch waited 15 s for its first byte).
public final class HTTPServer: Sendable {
    /// Connections served at once (reads and writes time out after `requestTimeout`).
    public static let maxConnections = 64
    /// Time for a whole request to arrive, and for each write of the response.
    public static let requestTimeout: Duration = .seconds(5)
    /// The request line and headers, at most (431 beyond).
    public static let maxHeadBytes = 16_384
    /// A request body, at most (413 beyond, unread).
    public static let maxBodyBytes = 65_536

    /// A request as a handler sees it.
    public struct Request: Sendable {
        public var method: String
        /// Path and query as sent.
        public var target: String
        /// Header values by lower-cased name (a repeated header's values joined by ", ").
        public var headers: [String: String]
        public var body: Data

        public init(method: String, target: String, headers: [String: String] = [:], body: Data = Data()) {
            self.method = method
            self.target = target
            self.headers = headers
            self.body = body
        }

        /// The target's path, percent-decoded (nil when it does not decode).
        public var path: String? { String(target.prefix { $0 != "?" && $0 != "#" }).removingPercentEncoding }

        /// The query's fields, in order (`application/x-www-form-urlencoded` rules).
        public var query: [(name: String, value: String)] {
            guard let q = target.firstIndex(of: "?") else { return [] }
            return Self.formFields(String(target[target.index(after: q)...].prefix { $0 != "#" }))
        }

        /// A form post's fields (empty unless the body is `application/x-www-form-urlencoded`).
        public var form: [(name: String, value: String)] {
            guard header("content-type")?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true else { return [] }
            return Self.formFields(String(decoding: body, as: UTF8.self))
        }

        public func header(_ name: String) -> String? { headers[name.lowercased()] }

        /// `a=1&b=two+words` → [("a", "1"), ("b", "two words")]; undecodable fields are dropped.
        public static func formFields(_ text: String) -> [(name: String, value: String)] {
            text.split(separator: "&").compactMap { pair in
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                func decode(_ s: Substring) -> String? { s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
                guard let name = decode(parts[0]), !name.isEmpty, let value = decode(parts.count > 1 ? parts[1] : "") else { return nil }
                return (name, value)
            }
        }
    }

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
    /// Answers a request with its headers and body. Runs on the connection's own thread, so it
    /// may block (a database query) without holding up other connections.
    public typealias RequestHandler = @Sendable (_ request: Request) -> Response

    /// The port listened on (the one the system chose when asked for 0).
    public let port: Int
    public let host: String
    private let fd: Int32
    private let stopped = CancellationFlag()
    private let closed = Mutex(false)
    private let active = ActiveConnections()

    /// The connections being served, and when each started waiting for its request (nil once
    /// its request is in: it is being answered and is never closed to make room).
    private final class ActiveConnections: Sendable {
        private let state = Mutex<[Int32: ContinuousClock.Instant?]>([:])

        /// Registers `client`; when that makes more than `limit`, shuts down the one that has
        /// been reading longest (it then ends as a client that went away). False when every
        /// other connection is being answered: `client` is then not served.
        func admit(_ client: Int32, limit: Int) -> Bool {
            state.withLock { s in
                if s.count >= limit {
                    let reading = s.compactMap { fd, since in since.map { (fd, $0) } }
                    guard let oldest = reading.min(by: { $0.1 < $1.1 }) else { return false }
                    shutdown(oldest.0, Int32(SHUT_RDWR))
                    s[oldest.0] = nil
                }
                s[client] = .some(ContinuousClock.now)
                return true
            }
        }

        /// `client`'s request is in: it is answered, not evicted.
        func answering(_ client: Int32) { state.withLock { s in if s[client] != nil { s[client] = .some(nil) } } }

        /// Forgets `client` (before it is closed, so its number is never shut down once reused).
        func remove(_ client: Int32) { _ = state.withLock { $0.removeValue(forKey: client) } }
    }

    /// Listens on `host` (an IPv4 address; default loopback) and `port` (0: any free port).
    public convenience init(host: String = "127.0.0.1", port: Int = 0, handler: @escaping Handler) throws {
        try self.init(host: host, port: port, requestHandler: { handler($0.method, $0.target) })
    }

    /// Listens on `host` and `port`, answering with the whole request in hand.
    public init(host: String = "127.0.0.1", port: Int = 0, requestHandler handler: @escaping RequestHandler) throws {
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
                guard active.admit(client, limit: Self.maxConnections) else {
                    close(client)
                    continue
                }
                let connection = Thread {
                    Self.serve(client, handler, active: active)
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

    private static func serve(_ client: Int32, _ handler: RequestHandler, active: ActiveConnections) {
        defer {
            active.remove(client)
            close(client)
        }
        var timeout = timeval(tv_sec: Int(requestTimeout.components.seconds), tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let deadline = ContinuousClock.now + requestTimeout
        var late = false
        let (request, refusal) = read { buffer in
            // Each read waits at most what is left of the request's time.
            let left = deadline - ContinuousClock.now
            guard left > .zero else {
                late = true
                return -1
            }
            let (seconds, attoseconds) = left.components
            var wait = timeval(tv_sec: Int(seconds), tv_usec: Int(max(1, attoseconds / 1_000_000_000_000)))
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            let n = recv(client, buffer.baseAddress, buffer.count, 0)
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { late = true }
            return n
        }
        active.answering(client)
        if request == nil && refusal == nil && late {
            respond(client, response: .text(408, "request timeout: the request did not arrive within \(requestTimeout)\n"), head: false)
            return
        }
        let response = refusal ?? request.map(handler) ?? .text(400, "bad request\n")
        respond(client, response: response, head: request?.method == "HEAD")
    }

    private static func respond(_ client: Int32, response: Response, head: Bool) {
        var text = "HTTP/1.1 \(response.status) \(reason(response.status))\r\nContent-Type: \(response.contentType)\r\n"
        text += "Content-Length: \(response.body.count)\r\nConnection: close\r\n"
        for (name, value) in response.headers.sorted(by: { $0.key < $1.key }) { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        var bytes = Data(text.utf8)
        if !head { bytes.append(response.body) }
        bytes.withUnsafeBytes { raw in
            var sent = 0
            while sent < raw.count {
                let n = send(client, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
                if n <= 0 { return }
                sent += n
            }
        }
    }

    /// Reads one request: its head up to the blank line, then a `Content-Length` body. Nil with
    /// a refusal for what is over a limit or malformed; nil and nil when the bytes end first.
    /// `receive` fills the start of the buffer it is given (4 KiB at most) and returns how many
    /// bytes it put there, 0 or less at the end of the stream (`recv`'s contract): the server
    /// reads from its socket, the fuzz target `http` from its input in pieces of any size.
    package static func read(receive: (UnsafeMutableRawBufferPointer) -> Int) -> (Request?, Response?) {
        var buffer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        var headEnd: Int?
        while headEnd == nil {
            let n = chunk.withUnsafeMutableBytes { receive($0) }
            if n <= 0 { return (nil, nil) }
            let from = max(0, buffer.count - 3)
            buffer += chunk[0..<n]
            headEnd = Self.headEnd(in: buffer, from: from)
            if headEnd == nil && buffer.count > maxHeadBytes { return (nil, .text(431, "request header fields too large\n")) }
        }
        switch parseHead(buffer[0..<headEnd!]) {
        case .refused(let request, let refusal):
            return (request, refusal)
        case .request(var request, let length):
            var body = Array(buffer[(headEnd! + 4)...].prefix(length))
            while body.count < length {
                let n = chunk.withUnsafeMutableBytes { receive(UnsafeMutableRawBufferPointer(rebasing: $0[0..<min($0.count, length - body.count)])) }
                if n <= 0 { return (nil, nil) }
                body += chunk[0..<n]
            }
            request.body = Data(body)
            return (request, nil)
        }
    }

    /// Where the blank line that ends a request's head starts in `buffer` (the index of its
    /// `\r\n\r\n`), looking at terminators that start at `from` or later; nil when there is none
    /// yet. A reader passes the length it had before its last read, less 3, so that a terminator
    /// split across reads is found and no byte is searched twice.
    package static func headEnd(in buffer: [UInt8], from: Int) -> Int? {
        (from..<max(from, buffer.count - 3)).first {
            buffer[$0] == 13 && buffer[$0 + 1] == 10 && buffer[$0 + 2] == 13 && buffer[$0 + 3] == 10
        }
    }

    /// What a request's head says (`parseHead`).
    package enum Head {
        /// A request to answer once its body of `bodyLength` bytes (`Content-Length`, 0 without
        /// one) has been read.
        case request(Request, bodyLength: Int)
        /// A refusal to send unread; with the request when its line could be read (a `HEAD`
        /// request's refusal is sent without a body).
        case refused(Request?, Response)
    }

    /// Parses a request's head: the bytes before the blank line that ends it (`headEnd`). A pure
    /// function of its bytes (the fuzz target `http` feeds it anything): request line, header
    /// fields (names lower-cased, repeats joined by ", "), and the refusals — 431 for a head
    /// over `maxHeadBytes`, 400 without a method and target or with a bad `Content-Length`, 411
    /// for a `Transfer-Encoding`, 413 for a body over `maxBodyBytes`.
    package static func parseHead(_ bytes: ArraySlice<UInt8>) -> Head {
        let head = String(decoding: bytes, as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: false)
        let line = head.first?.split(separator: " ") ?? []
        guard bytes.count <= maxHeadBytes else { return .refused(nil, .text(431, "request header fields too large\n")) }
        guard line.count >= 2 else { return .refused(nil, .text(400, "bad request\n")) }
        var headers: [String: String] = [:]
        for field in head.dropFirst() {
            guard let colon = field.firstIndex(of: ":") else { continue }
            let name = field[..<colon].lowercased(), value = field[field.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[name] = headers[name].map { $0 + ", " + value } ?? value
        }
        let request = Request(method: String(line[0]), target: String(line[1]), headers: headers)
        if headers["transfer-encoding"] != nil { return .refused(request, .text(411, "a body needs Content-Length\n")) }
        let length = headers["content-length"].map { Int($0) } ?? 0
        guard let length, length >= 0 else { return .refused(request, .text(400, "bad Content-Length\n")) }
        guard length <= maxBodyBytes else { return .refused(request, .text(413, "request body over \(maxBodyBytes) bytes\n")) }
        return .request(request, bodyLength: length)
    }

    private static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 303: "See Other"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 411: "Length Required"
        case 413: "Content Too Large"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }
}
