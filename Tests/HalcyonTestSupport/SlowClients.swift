import Foundation
import HalcyonDomain
import HalcyonRuntime
import Synchronization

/// Slow clients (slowloris) against one of Halcyon's HTTP servers: connections that each send
/// a request a byte at a time, and a normal request made while they trickle.
public enum SlowClients {
    /// What happened: the normal request's status and time, and how the trickling connections
    /// fared.
    public struct Outcome: Sendable, CustomStringConvertible {
        /// The normal request's status (0: no answer).
        public var status = 0
        public var answeredIn: Duration = .zero
        /// Trickling connections still open when the normal request was made.
        public var tricklingAtRequest = 0
        /// At the end: connections answered 408, closed without an answer, still open.
        public var answered408 = 0
        public var closedUnanswered = 0
        public var stillOpen = 0
        /// From the first byte until the last trickling connection was closed by the server.
        public var allClosedAfter: Duration?

        public var description: String {
            "status \(status) in \(answeredIn); \(tricklingAtRequest) trickling then; at the end \(answered408) answered 408, "
                + "\(closedUnanswered) closed unanswered, \(stillOpen) still open; all closed after \(allClosedAfter.map { "\($0)" } ?? "-")"
        }
    }

    /// Opens `count` connections to 127.0.0.1:`port` that each send one byte of a request every
    /// `every` seconds; after the second byte (`every` + 0.5 s) makes a normal `GET path` (with
    /// `Host: host`) and times it; then waits until the server has closed every trickling
    /// connection, at most until `end` seconds after the first byte, and looks at how each ended.
    /// Runs on threads of its own.
    public static func run(port: Int, path: String, host: String, count: Int = 64, every: Double = 4, end: Double = 20) async throws -> Outcome {
        try await Blocking.run(.io) { try measure(port: port, path: path, host: host, count: count, every: every, end: end) }
    }

    private static func measure(port: Int, path: String, host: String, count: Int, every: Double, end: Double) throws -> Outcome {
        let slow = try (0..<count).map { _ in try connect(port) }
        let prefix = Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\nX-Slow: ".utf8)
        // The trickler ends before the descriptors are closed: once closed, their numbers may be
        // reused by other tests' connections (a database's), which must never get these bytes.
        let stop = Atomic<Bool>(false), ended = DispatchSemaphore(value: 0)
        let started = ContinuousClock.now
        let trickler = Thread {
            defer { ended.signal() }
            var i = 0
            while !stop.load(ordering: .relaxed) {
                let byte = i < prefix.count ? prefix[i] : UInt8(ascii: "x")
                for fd in slow { _ = [byte].withUnsafeBytes { send(fd, $0.baseAddress, 1, Int32(MSG_NOSIGNAL)) } }
                i += 1
                let next = started + .milliseconds(Int(every * 1000) * i)
                while !stop.load(ordering: .relaxed) && ContinuousClock.now < next { Thread.sleep(forTimeInterval: 0.05) }
            }
        }
        defer {
            stop.store(true, ordering: .relaxed)
            ended.wait()
            slow.forEach { close($0) }
        }
        trickler.start()
        var outcome = Outcome()
        var received = [[UInt8]](repeating: [], count: slow.count)
        Thread.sleep(until: started + .milliseconds(Int(every * 1000) + 500))
        outcome.tricklingAtRequest = slow.indices.filter { drain(slow[$0], into: &received[$0]) }.count
        let before = ContinuousClock.now
        outcome.status = (try? get(port: port, path: path, host: host)) ?? 0
        outcome.answeredIn = ContinuousClock.now - before
        // A loaded machine may be slow to close them: look until every one is, or `end`.
        var open = Set(slow.indices)
        while !open.isEmpty && ContinuousClock.now < started + .milliseconds(Int(end * 1000)) {
            open = open.filter { drain(slow[$0], into: &received[$0]) }
            if open.isEmpty { outcome.allClosedAfter = ContinuousClock.now - started } else { Thread.sleep(forTimeInterval: 0.1) }
        }
        for i in slow.indices {
            if open.contains(i) {
                outcome.stillOpen += 1
            } else if String(decoding: received[i], as: UTF8.self).hasPrefix("HTTP/1.1 408 ") {
                outcome.answered408 += 1
            } else {
                outcome.closedUnanswered += 1
            }
        }
        return outcome
    }

    /// A plain `GET` on a connection of its own; the response's status.
    public static func get(port: Int, path: String, host: String) throws -> Int {
        let fd = try connect(port)
        defer { close(fd) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let request = Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var response = [UInt8](), chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            response += chunk[0..<n]
        }
        let line = String(decoding: response.prefix { $0 != 13 }, as: UTF8.self).split(separator: " ")
        return line.count > 1 ? Int(line[1]) ?? 0 : 0
    }

    /// Reads what has arrived on `fd` into `received`, without waiting; whether it is still open.
    private static func drain(_ fd: Int32, into received: inout [UInt8]) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                received += chunk[0..<n]
                continue
            }
            if n == 0 { return false }
            return errno == EAGAIN || errno == EWOULDBLOCK  // otherwise reset
        }
    }

    private static func connect(_ port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Foundation.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard fd >= 0, rc == 0 else {
            if fd >= 0 { close(fd) }
            throw HalcyonError(.internal, "cannot connect to 127.0.0.1:\(port)")
        }
        return fd
    }
}

extension Thread {
    /// Sleeps until `instant` (at once when it has passed).
    static func sleep(until instant: ContinuousClock.Instant) {
        let left = instant - ContinuousClock.now
        if left > .zero { Thread.sleep(forTimeInterval: left.seconds) }
    }
}
