import Foundation
import HalcyonCore
import Synchronization
import Testing

/// The small server behind `/metrics` and the demo's origin.
@Suite struct HTTPServerTests {
    /// Connects to 127.0.0.1:`port`; the caller closes the descriptor.
    func connect(_ port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Foundation.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(fd >= 0 && rc == 0)
        return fd
    }

    /// Sends a GET for `path` and reads the whole response (the server closes the connection).
    func get(_ port: Int, _ path: String, extraHeaders: String = "") throws -> String {
        let fd = try connect(port)
        defer { close(fd) }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: x\r\n\(extraHeaders)\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        var response = [UInt8](), chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            response += chunk[0..<n]
        }
        return String(decoding: response, as: UTF8.self)
    }

    /// A request's headers (names case-insensitive, repeats joined), its query and a form body
    /// that arrives in a second packet; over-limit bodies and heads are refused unread.
    @Test func requestsCarryHeadersQueryAndAFormBody() throws {
        let server = try HTTPServer(requestHandler: { r in
            let form = r.form.map { "\($0.name)=\($0.value)" }.joined(separator: "|")
            let query = r.query.map { "\($0.name)=\($0.value)" }.joined(separator: "|")
            return .text(200, "\(r.method) \(r.path ?? "?") [\(query)] [\(form)] \(r.header("X-Twice") ?? "-")\n")
        })
        defer { server.stop() }
        let fd = try connect(server.port)
        defer { close(fd) }
        let body = "a=1&b=two+words&c=%3Cx%3E"
        let head =
            "POST /p%20q?x=%2F&y HTTP/1.1\r\nHost: x\r\nx-twice: 1\r\nX-Twice: 2\r\n"
            + "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
        _ = Array(head.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        usleep(50_000)
        _ = Array(body.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        var response = [UInt8](), chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            response += chunk[0..<n]
        }
        let text = String(decoding: response, as: UTF8.self)
        #expect(text.hasSuffix("POST /p q [x=/|y=] [a=1|b=two words|c=<x>] 1, 2\n"), "\(text)")

        let big = try get(server.port, "/", extraHeaders: "Content-Length: \(HTTPServer.maxBodyBytes + 1)\r\n")
        #expect(big.hasPrefix("HTTP/1.1 413 "))
        let longHead = try get(server.port, "/", extraHeaders: "X-Filler: \(String(repeating: "f", count: HTTPServer.maxHeadBytes))\r\n")
        #expect(longHead.hasPrefix("HTTP/1.1 431 "))
        #expect(try get(server.port, "/", extraHeaders: "Content-Length: -4\r\n").hasPrefix("HTTP/1.1 400 "))
    }

    @Test func answersWithStatusHeadersAndBody() throws {
        let server = try HTTPServer { method, target in .text(target == "/hello" ? 200 : 404, "\(method) \(target)\n") }
        defer { server.stop() }
        let ok = try get(server.port, "/hello")
        #expect(ok.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(ok.contains("Content-Length: 11\r\n") && ok.hasSuffix("\r\n\r\nGET /hello\n"))
        #expect(try get(server.port, "/other").hasPrefix("HTTP/1.1 404 Not Found\r\n"))
    }

    /// Clients that connect and say nothing (each holds its connection for the 5 s read
    /// timeout) must not hold back anyone else: on Dispatch's global queue, two of them
    /// stalled every other request on a 2-core machine.
    @Test func silentClientsDoNotHoldBackOthers() throws {
        let server = try HTTPServer { _, _ in .text(200, "ok") }
        defer { server.stop() }
        let silent = try (0..<8).map { _ in try connect(server.port) }
        defer { silent.forEach { close($0) } }
        Thread.sleep(forTimeInterval: 0.2)  // let the server pick them up
        #expect(try get(server.port, "/").hasSuffix("\r\n\r\nok"))
        // Answered while the silent connections are all still open: a request held back until
        // their 5 s read timeout would find them closed by the server (an order, not a duration
        // a loaded machine could stretch).
        let open = silent.filter { fd in
            var byte: UInt8 = 0
            return recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
        }
        #expect(open.count == silent.count, "a request waited behind silent connections: \(silent.count - open.count) of them timed out first")
    }

    /// Slow clients (slowloris): more connections than the server serves at once, each sending
    /// one byte of a request every half second, do not keep a normal request from being
    /// answered (the longest-waiting one is closed to make room), and a trickled request that
    /// has not arrived within the request timeout is answered 408 — per request, not per read.
    @Test func slowClientsCannotHoldTheServer() throws {
        let server = try HTTPServer { _, _ in .text(200, "ok") }
        defer { server.stop() }
        let slow = try (0..<(HTTPServer.maxConnections + 6)).map { _ in try connect(server.port) }
        let prefix = Array("GET / HTTP/1.1\r\nX-Slow: ".utf8)
        // The trickler ends before the descriptors are closed: once closed, their numbers are
        // reused by other tests' connections (a database's), which must never get these bytes.
        let stop = Atomic<Bool>(false), ended = DispatchSemaphore(value: 0)
        let trickler = Thread {
            defer { ended.signal() }
            for i in 0..<40 where !stop.load(ordering: .relaxed) {
                for fd in slow { _ = [prefix[min(i, prefix.count - 1)]].withUnsafeBytes { send(fd, $0.baseAddress, 1, Int32(MSG_NOSIGNAL)) } }
                Thread.sleep(forTimeInterval: 0.5)
            }
        }
        defer {
            stop.store(true, ordering: .relaxed)
            ended.wait()
            slow.forEach { close($0) }
        }
        trickler.start()
        Thread.sleep(forTimeInterval: 1.5)  // every slot taken by a trickling client
        let started = ContinuousClock.now
        let answer = try get(server.port, "/")
        let took = ContinuousClock.now - started
        print("slow clients: a normal request answered in \(took) beside \(slow.count) trickling connections")
        #expect(answer.hasSuffix("\r\n\r\nok"), "\(answer)")
        #expect(took < .seconds(3), "the normal request waited \(took)")
        // The trickling connection that is still open gets 408 once its request's time is up.
        var response = [UInt8](), chunk = [UInt8](repeating: 0, count: 1024)
        let last = slow.last!
        var wait = timeval(tv_sec: 15, tv_usec: 0)
        setsockopt(last, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(last, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            response += chunk[0..<n]
        }
        #expect(String(decoding: response, as: UTF8.self).hasPrefix("HTTP/1.1 408 "), "\(String(decoding: response, as: UTF8.self))")
    }
}
