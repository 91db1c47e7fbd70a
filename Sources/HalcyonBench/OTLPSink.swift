import Foundation
import HalcyonCLI

/// A collector stand-in for W1's traced row: an HTTP/1.1 server on 127.0.0.1 that reads each
/// POST (its body by Content-Length) and answers `200` with an empty body, as an OTLP/HTTP
/// collector answers an export it took — so the worker's exporter does all of its work (encode,
/// POST, read the answer) without a collector's own CPU in the machine's share. One thread per
/// connection; it counts the requests and body bytes it took.
final class OTLPSink: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var requests = 0
    private var bytes = 0

    /// The traces endpoint to give `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`.
    var endpoint: String { "http://127.0.0.1:\(port)/v1/traces" }
    /// Exports taken so far, and their bytes.
    var taken: (requests: Int, bytes: Int) { lock.withLock { (requests, bytes) } }

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CommandFailure("the OTLP sink's socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound, listen(fd, 16) == 0 else {
            close(fd)
            throw CommandFailure("the OTLP sink could not listen: \(String(cString: strerror(errno)))")
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let accepting = Thread { [self] in acceptLoop() }
        accepting.name = "bench-otlp-sink"
        accepting.start()
    }

    /// Stops taking connections (those open end with their client).
    func stop() { shutdown(listener, Int32(SHUT_RDWR)) }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                close(listener)
                return
            }
            let serving = Thread { [self] in serve(client) }
            serving.start()
        }
    }

    /// Requests on one connection until the client closes it.
    private func serve(_ fd: Int32) {
        defer { close(fd) }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            // The head, then the body its Content-Length names.
            var headEnd: Int?
            while headEnd == nil {
                if let r = Self.find([13, 10, 13, 10], in: buffer) {
                    headEnd = r
                    break
                }
                let n = read(fd, &chunk, chunk.count)
                if n <= 0 { return }
                buffer += chunk[0..<n]
            }
            guard let end = headEnd else { return }
            let head = String(decoding: buffer[0..<end], as: UTF8.self).lowercased()
            let length =
                head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
            while buffer.count < end + 4 + length {
                let n = read(fd, &chunk, chunk.count)
                if n <= 0 { return }
                buffer += chunk[0..<n]
            }
            buffer.removeFirst(end + 4 + length)
            lock.withLock {
                requests += 1
                bytes += length
            }
            let answer = Array("HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n".utf8)
            guard answer.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == answer.count else { return }
        }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] && Array(haystack[i..<i + needle.count]) == needle {
            return i
        }
        return nil
    }
}
