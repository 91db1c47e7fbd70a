import Foundation
import HalcyonDomain
import HalcyonRuntime
import Synchronization

/// Clients that download a large response slowly: each sends its `GET` at once, then takes a
/// few KB every 100 ms (a small receive buffer, so the kernel does not take the bytes for it)
/// until every response has begun and what is measured meanwhile is done; then reads the rest
/// as fast as it comes and checks every byte.
public enum SlowReaders {
    /// What each client got.
    public struct Outcome: Sendable, CustomStringConvertible {
        /// Per client: the status (0: no response head), the body's bytes received, and whether
        /// every byte received was the expected one at its place.
        public var statuses: [Int] = []
        public var received: [Int] = []
        public var matching: [Bool] = []
        /// Per client: the response head's fields, names lower-cased.
        public var headers: [[String: String]] = []
        /// When every client had its response head (nil: not within `end`), how long the slow
        /// part lasted, and the fast part.
        public var headsAfter: Duration?
        public var slowFor: Duration = .zero
        public var fastFor: Duration = .zero

        /// Clients that got a 200 and exactly `bytes` bytes, each the expected one.
        public func complete(_ bytes: Int) -> Int {
            statuses.indices.filter { statuses[$0] == 200 && received[$0] == bytes && matching[$0] }.count
        }

        public var description: String {
            let byStatus = Dictionary(grouping: statuses, by: { $0 }).mapValues(\.count).sorted { $0.key < $1.key }
            return
                "statuses \(byStatus.map { "\($0.key)×\($0.value)" }.joined(separator: ", ")); received \(received.min() ?? 0)–\(received.max() ?? 0) bytes; "
                + "\(matching.filter { !$0 }.count) with a wrong byte; every head after \(headsAfter.map { "\($0)" } ?? "-"), slow \(slowFor), fast \(fastFor)"
        }
    }

    /// `count` clients `GET path` from 127.0.0.1:`port` (with `Host: host`), each reading at most
    /// `perRead` bytes every `every` seconds until every client has its response head (the server
    /// has begun every response: holds every stream at once), `during` — started then, on a thread
    /// of its own (what to measure while the streams are held) — has returned, and `slow` seconds
    /// have passed; then all read to the end (the server closing, or `Content-Length` reached).
    /// Both parts wait on progress, not on the clock: `end` seconds in all is only a backstop for
    /// a server that never answers. Bodies are compared with `expected` byte by byte as they
    /// arrive (no client keeps its body).
    public static func run(
        port: Int, path: String, host: String, count: Int, expected: Data, perRead: Int = 4096, every: Double = 0.1, slow: Double,
        end: Double = 600, during: @escaping @Sendable () -> Void = {}
    ) async throws -> Outcome {
        try await Blocking.run(.io) {
            try measure(
                port: port, path: path, host: host, count: count, expected: expected, perRead: perRead, every: every, slow: slow, end: end,
                during: during)
        }
    }

    private final class Client {
        let fd: Int32
        var head = [UInt8]()
        var status = 0
        var headers: [String: String] = [:]
        var length: Int?
        var received = 0
        var matching = true
        var open = true

        init(fd: Int32) { self.fd = fd }

        var done: Bool { !open || (length.map { received >= $0 } ?? false) }

        /// Takes what `bytes` holds: the head first, then body bytes checked against `expected`.
        func take(_ bytes: UnsafeRawBufferPointer, expected: Data) {
            var body = bytes[...]
            if status == 0 {
                head += bytes
                guard let end = Self.headEnd(head) else { return }
                let lines = String(decoding: head[..<end], as: UTF8.self).components(separatedBy: "\r\n")
                let first = lines[0].split(separator: " ")
                status = first.count > 1 ? Int(first[1]) ?? -1 : -1
                for line in lines.dropFirst() {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
                length = headers["content-length"].flatMap { Int($0) }
                let rest = head.count - (end + 4)
                body = bytes[(bytes.count - rest)...]
                head = []
            }
            guard !body.isEmpty else { return }
            if status == 200 && matching {
                let upper = received + body.count
                matching =
                    upper <= expected.count
                    && expected.withUnsafeBytes { e in memcmp(e.baseAddress! + received, bytes.baseAddress! + body.startIndex, body.count) == 0 }
            }
            received += body.count
        }

        static func headEnd(_ bytes: [UInt8]) -> Int? {
            guard bytes.count >= 4 else { return nil }
            for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
                return i
            }
            return nil
        }
    }

    private static func measure(
        port: Int, path: String, host: String, count: Int, expected: Data, perRead: Int, every: Double, slow: Double, end: Double,
        during: @escaping @Sendable () -> Void
    ) throws -> Outcome {
        let clients = try (0..<count).map { _ in Client(fd: try connect(port)) }
        defer { clients.forEach { close($0.fd) } }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n".utf8)
        for c in clients { _ = request.withUnsafeBytes { send(c.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
        let started = ContinuousClock.now
        let finished = DispatchSemaphore(value: 0)
        var outcome = Outcome()
        var duringStarted = false, duringDone = false
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        // Slow: a few KB per client every `every` seconds, until every head is in, `during` has
        // run and `slow` seconds have passed.
        var tick = 0
        while ContinuousClock.now - started < .milliseconds(Int(end * 1000)) {
            for c in clients where !c.done { read(c, into: &buffer, max: perRead, expected: expected) }
            if !duringStarted && clients.allSatisfy({ $0.status != 0 || !$0.open }) {
                duringStarted = true
                outcome.headsAfter = ContinuousClock.now - started
                Thread {
                    during()
                    finished.signal()
                }.start()
            }
            if duringStarted && !duringDone { duringDone = finished.wait(timeout: .now()) == .success }
            if duringDone && ContinuousClock.now - started >= .milliseconds(Int(slow * 1000)) { break }
            tick += 1
            Thread.sleep(until: started + .milliseconds(Int(every * 1000) * tick))
        }
        outcome.slowFor = ContinuousClock.now - started
        // Fast: everything, as it comes.
        let fast = ContinuousClock.now
        while clients.contains(where: { !$0.done }) && ContinuousClock.now - started < .milliseconds(Int(end * 1000)) {
            var fds = clients.filter { !$0.done }.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            _ = poll(&fds, nfds_t(fds.count), 200)
            for c in clients where !c.done { read(c, into: &buffer, max: buffer.count, expected: expected) }
        }
        outcome.fastFor = ContinuousClock.now - fast
        if duringStarted && !duringDone { finished.wait() }
        outcome.statuses = clients.map(\.status)
        outcome.received = clients.map(\.received)
        outcome.matching = clients.map(\.matching)
        outcome.headers = clients.map(\.headers)
        return outcome
    }

    /// Reads what has arrived for `c`, up to `max` bytes, without waiting.
    private static func read(_ c: Client, into buffer: inout [UInt8], max: Int, expected: Data) {
        var left = max
        while left > 0 && !c.done {
            let n = buffer.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, min(left, $0.count), Int32(MSG_DONTWAIT)) }
            if n > 0 {
                buffer.withUnsafeBytes { c.take(UnsafeRawBufferPointer(rebasing: $0[0..<n]), expected: expected) }
                left -= n
            } else {
                if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) { c.open = false }
                return
            }
        }
    }

    /// A connection to 127.0.0.1:`port` with a small receive buffer (set before connecting, so
    /// the window stays small): the server's writes wait for the client's reads.
    public static func connect(_ port: Int, receiveBuffer: Int32 = 32 << 10) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HalcyonError(.internal, "socket: \(errno)") }
        var size = receiveBuffer
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Foundation.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw HalcyonError(.internal, "cannot connect to 127.0.0.1:\(port)")
        }
        return fd
    }
}
