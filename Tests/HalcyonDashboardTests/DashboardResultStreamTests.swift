import Foundation
import HalcyonDashboard
import HalcyonDomain
import HalcyonRuntime
import HalcyonS3
import HalcyonStore
import HalcyonTestSupport
import Testing

/// How a result is streamed: the limit on streams at once (`503` with `Retry-After` beyond it,
/// while `HEAD`, `304` and pages are still answered), a client that disconnects mid-stream giving
/// its stream back, a client that stops reading cut off, an
/// object deleted on disk mid-stream still sent whole, and one replaced or deleted in a bucket
/// mid-stream ending the stream short, never with another object's bytes.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .serialized)
struct DashboardResultStreamTests {
    static let size = 24 << 20

    /// A store directory holding `data` as a result; its digest.
    static func diskStore(_ data: Data) async throws -> (URL, String) {
        let dir = try TestEnvironment.temporaryDirectory("dashboard-stream")
        let object = try await DiskStore(root: dir).store(data, ext: "png", info: DashboardSlowReaderTests.info, key: "k", expiration: .days(1))
        return (dir, object.digest)
    }

    @Test func streamsOverTheLimitAreAskedToRetryAndStalledOnesAreCutOff() async throws {
        let f = try await DashboardFixture.shared.value
        let data = DashboardSlowReaderTests.pattern(Self.size, seed: 7)
        let (dir, digest) = try await Self.diskStore(data)
        defer { try? FileManager.default.removeItem(at: dir) }
        let server = try await f.server {
            $0.storeRoot = dir
            $0.maxResultStreams = 2
            $0.resultStallTimeout = .seconds(4)
        }
        defer { server.stop() }
        let path = "/results/\(digest)"
        // Two clients that read the head and then nothing.
        let stalled = try await Blocking.run { try (0..<2).map { _ in try RawResponse.open(port: server.port, path) } }
        defer { stalled.forEach { close($0.fd) } }
        #expect(stalled.map(\.status) == [200, 200] && stalled.allSatisfy { $0.headers["content-length"] == String(Self.size) })

        let refused = try await HTTP.get(server, path)
        #expect(refused.status == 503 && refused.headers["retry-after"] == "5", "\(refused.status) \(refused.headers)")
        #expect(refused.text.contains("--max-result-streams"), "\(refused.text)")
        // A HEAD, a revalidation and the pages take no stream.
        let head = try await HTTP.request(port: server.port, "HEAD", path)
        #expect(head.status == 200 && head.headers["content-length"] == String(Self.size) && head.body.isEmpty)
        #expect(head.headers["etag"] == "\"\(digest)\"" && head.headers["content-type"] == "image/png")
        let revalidated = try await HTTP.get(server, path, headers: ["If-None-Match": "\"\(digest)\""])
        #expect(revalidated.status == 304 && revalidated.body.isEmpty && revalidated.headers["etag"] == "\"\(digest)\"")
        #expect(revalidated.headers["cache-control"]?.hasPrefix("private, max-age=") == true)
        #expect(try await HTTP.get(server, path, headers: ["If-None-Match": "\"\(String(repeating: "0", count: 64))\""]).status == 503)
        #expect(try await HTTP.get(server, "/").status == 200)

        // The stalled streams are cut off after the stall timeout; then a stream is served again.
        var served: HTTPResponse?
        _ = try await waitUntil(30) {
            let r = try await HTTP.get(server, path)
            if r.status == 200 { served = r } else { try await Task.sleep(for: .milliseconds(300)) }
            return r.status == 200
        }
        let whole = try #require(served, "no stream after the stalled ones were cut off")
        #expect(whole.body == data && Digest.sha256Hex(whole.body) == digest, "\(whole.body.count) bytes")
        // A served stream says one stalled stream was cut off; the other stalled from the same
        // moment, but a busy machine may have written its last bytes a little later: one more stall
        // timeout before reading, so that reading cannot resume a stream not yet cut off.
        try await Task.sleep(for: .seconds(4))
        for s in stalled {
            // What the kernel had queued for it comes first (a few MB through a small window), then the end.
            let rest = try await Blocking.run { try s.readToEnd(timeout: 120) }
            #expect(rest.closed && s.body.count + rest.bytes < Self.size, "a stalled stream was closed short: \(rest)")
        }
    }

    /// One stream at once, and a stall timeout no test waits for: only the client's going away can
    /// give the stream back. Three times over, so a slot lost at each disconnect would show.
    @Test func aClientThatDisconnectsMidStreamFreesItsStream() async throws {
        let f = try await DashboardFixture.shared.value
        let data = DashboardSlowReaderTests.pattern(Self.size, seed: 11)
        let (dir, digest) = try await Self.diskStore(data)
        defer { try? FileManager.default.removeItem(at: dir) }
        let server = try await f.server {
            $0.storeRoot = dir
            $0.maxResultStreams = 1
            $0.resultStallTimeout = .seconds(3600)
        }
        defer { server.stop() }
        let path = "/results/\(digest)"
        for round in 1...3 {
            let stream = try await Blocking.run { try RawResponse.open(port: server.port, path) }
            #expect(stream.status == 200, "round \(round)")
            let held = try await HTTP.get(server, path)
            #expect(held.status == 503, "round \(round): the one stream is taken, \(held.status)")
            // Gone mid-stream, with bytes unread (the kernel answers the server with a reset).
            close(stream.fd)
            var served: HTTPResponse?
            let freed = try await waitUntil(120) {
                let r = try await HTTP.get(server, path)
                if r.status == 200 { served = r } else { try await Task.sleep(for: .milliseconds(200)) }
                return r.status == 200
            }
            #expect(freed, "round \(round): the stream was not given back after the client went away")
            if let served { #expect(Digest.sha256Hex(served.body) == digest, "round \(round): \(served.body.count) bytes") }
        }
    }

    @Test func anObjectSweptMidStreamIsStillSentWhole() async throws {
        let f = try await DashboardFixture.shared.value
        let data = DashboardSlowReaderTests.pattern(Self.size, seed: 8)
        let (dir, digest) = try await Self.diskStore(data)
        defer { try? FileManager.default.removeItem(at: dir) }
        let server = try await f.server { $0.storeRoot = dir }
        defer { server.stop() }
        let stream = try await Blocking.run { try RawResponse.open(port: server.port, "/results/\(digest)") }
        defer { close(stream.fd) }
        #expect(stream.status == 200)
        try await Task.sleep(for: .milliseconds(300))
        // What a sweep does to an expired object: unlinked under its lock.
        try FileManager.default.removeItem(at: dir.appendingPathComponent(StoreLayout.objectPath(digest: digest, ext: "png")))
        let rest = try await Blocking.run { try stream.readToEnd(timeout: 60, keep: true) }
        #expect(stream.body + rest.kept == data, "\(stream.body.count + rest.bytes) bytes of \(data.count)")
        #expect(try await HTTP.get(server, "/results/\(digest)").status == 404, "gone for the next request")
    }

    @Test(.enabled(if: TestEnvironment.s3Available, "needs SeaweedFS"))
    func anObjectReplacedOrDeletedInABucketMidStreamEndsTheStreamShort() async throws {
        let f = try await DashboardFixture.shared.value
        let location = try StoreLocation(parsing: TestEnvironment.s3StoreURL(), environment: TestEnvironment.s3Environment)
        let bucket = try #require(try location.open() as? ObjectStore)
        let server = try await f.server { $0.store = location }
        defer { server.stop() }
        for (seed, replace) in [(UInt64(9), true), (10, false)] {
            let data = DashboardSlowReaderTests.pattern(Self.size, seed: seed)
            let object = try await bucket.store(data, ext: "png", info: DashboardSlowReaderTests.info, key: "k\(seed)", expiration: .days(1))
            let stream = try await Blocking.run { try RawResponse.open(port: server.port, "/results/\(object.digest)") }
            defer { close(stream.fd) }
            #expect(stream.status == 200 && stream.headers["content-length"] == String(Self.size))
            try await Task.sleep(for: .milliseconds(300))
            if replace {
                _ = try await bucket.client.put(object.path, data: Data(repeating: 0xEE, count: Self.size), ifNoneMatch: false)
            } else {
                try await bucket.client.delete(object.path)
            }
            let rest = try await Blocking.run { try stream.readToEnd(timeout: 60, keep: true) }
            let got = stream.body + rest.kept
            let what = replace ? "replaced" : "deleted"
            #expect(rest.closed && got.count < Self.size, "\(what): the stream ended short (\(got.count) of \(Self.size) bytes)")
            #expect(got == data.prefix(got.count), "\(what): every byte sent is the object's, in place")
        }
    }
}

/// A raw `GET` whose response is read by hand: the head (and whatever body came with it), then
/// the rest when asked.
final class RawResponse: Sendable {
    let fd: Int32
    let status: Int
    let headers: [String: String]
    /// Body bytes that came with the head.
    let body: Data

    private init(fd: Int32, status: Int, headers: [String: String], body: Data) {
        self.fd = fd
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// Sends `GET path` on a connection with a small receive buffer and reads until the head is in.
    static func open(port: Int, _ path: String) throws -> RawResponse {
        let fd = try SlowReaders.connect(port)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var received = Data()
        var chunk = [UInt8](repeating: 0, count: 1024)
        while received.range(of: Data("\r\n\r\n".utf8)) == nil {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else {
                close(fd)
                throw FixtureError("no response head (\(received.count) bytes)")
            }
            received.append(contentsOf: chunk[0..<n])
        }
        let split = received.range(of: Data("\r\n\r\n".utf8))!
        let lines = String(decoding: received[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            if let colon = line.firstIndex(of: ":") {
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        let status = Int(lines[0].split(separator: " ")[1]) ?? 0
        return RawResponse(fd: fd, status: status, headers: headers, body: Data(received[split.upperBound...]))
    }

    /// Reads until the server closes (or `timeout` seconds pass): how many bytes came, whether it
    /// closed, and the bytes themselves with `keep`.
    func readToEnd(timeout: Double, keep: Bool = false) throws -> (bytes: Int, closed: Bool, kept: Data) {
        var kept = Data(), bytes = 0
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while ContinuousClock.now < deadline {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 200) >= 0 else { continue }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                bytes += n
                if keep { kept.append(contentsOf: chunk[0..<n]) }
            } else if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return (bytes, true, kept)
            }
        }
        return (bytes, false, kept)
    }
}
