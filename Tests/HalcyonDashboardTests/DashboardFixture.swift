import Foundation
import HalcyonDashboard
import HalcyonQueue
import HalcyonRuntime
import HalcyonSamples
import HalcyonStore
import HalcyonTestSupport
import Logging

/// A database with jobs a real worker has processed (two results in a real store, a 404, a
/// job whose fields hold markup). `shared` is only read (its counts are asserted); tests that
/// change jobs use `forChanges` and insert rows of their own.
struct DashboardFixture: Sendable {
    let db: TestDatabase
    let store: URL
    /// Job ids by role.
    let magenta: Int64, photo: Int64, missing: Int64, hostile: Int64
    let markup = "<script>alert('halcyon')</script>"

    /// Made by whichever test asks first (its worker and sweep are processes).
    static let shared = Task { try await ProcessTurns.sharedFixture { try await DashboardFixture.make() } }
    static let forChanges = Task { try await ProcessTurns.sharedFixture { try await DashboardFixture.make() } }

    static func make() async throws -> DashboardFixture {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("dashboard-store")
        let magentaURL = try Origin.publish("dashboard-magenta.png", try SampleImages.solid(width: 300, height: 200, red: 255, green: 0, blue: 255))
        let photoURL = try Origin.publish("dashboard-photo.jpg", try SampleImages.photo(width: 640, height: 480, seed: 19))
        let markup = "<script>alert('halcyon')</script>"
        func enqueue(_ source: String, _ processors: String, extra: String = "") async throws -> Int64 {
            let r = try await db.query(
                "INSERT INTO halcyon.jobs (source, processors, max_attempts, tags, cache_key) VALUES ($1, $2, 1, $3::text[], $4) RETURNING id",
                [source, processors, extra.isEmpty ? "{}" : PGRows.textArrayLiteral([extra]), extra.isEmpty ? nil : extra])
            return Int64(try requireValue(r.value(0, "id")))!
        }
        let magenta = try await enqueue(magentaURL, "resize(120x80) |> format(png)")
        let photo = try await enqueue(photoURL, "resize(320x320, mode=fill) |> format(jpeg, quality=82)")
        let missing = try await enqueue("\(TestEnvironment.origin)/files/dashboard-none.jpg", "resize(64x64)")
        let hostile = try await enqueue("\(TestEnvironment.origin)/files/\(markup).jpg", "resize(64x64)", extra: markup)
        let w = try HalcyonProcess(
            ["work", "--store", store.path, "--log-level", "info", "--allow-network", "127.0.0.1/32", "--drain"], conninfo: db.conninfo)
        guard await w.wait(timeout: 180) == 0 else { throw FixtureError("the worker failed: \(w.output.suffix(2000))") }
        // A sweep records the store's size, which the overview shows against its limit.
        let sweep = try HalcyonProcess(["sweep", "--store", store.path, "--store-size-limit", "64KiB"], conninfo: db.conninfo)
        guard await sweep.wait(timeout: 60) == 0 else { throw FixtureError("the sweep failed: \(sweep.output.suffix(2000))") }
        // The hostile job's error also carries the markup in a per-source entry.
        try await db.query(
            """
            UPDATE halcyon.jobs SET errors = errors || jsonb_build_array(jsonb_build_object(
                'code', 'fetch.http_status', 'message', $2::text, 'at', now(), 'attempt', 1,
                'sources', jsonb_build_array(jsonb_build_object('source', $2::text, 'code', 'fetch.http_status', 'message', $2::text, 'attempts', 1, 'permanent', true))))
            WHERE id = $1::bigint
            """, [String(hostile), markup])
        return DashboardFixture(db: db, store: store, magenta: magenta, photo: photo, missing: missing, hostile: hostile)
    }

    /// A dashboard over this database and store.
    func server(_ configure: (inout DashboardConfiguration) -> Void = { _ in }) async throws -> DashboardServer {
        try await Self.server(db, store: store, configure)
    }

    /// A dashboard over `db` and the store at `store`, on a port of its own, quiet.
    static func server(
        _ db: TestDatabase, store: URL, _ configure: (inout DashboardConfiguration) -> Void = { _ in }
    ) async throws -> DashboardServer {
        var c = DashboardConfiguration()
        c.port = 0
        c.storeRoot = store
        configure(&c)
        var logger = Logger(label: "dashboard-test")
        logger.logLevel = .critical
        return try await DashboardServer.start(configuration: c, conninfo: db.conninfo, logger: logger)
    }

    func value(_ sql: String, _ params: [String?] = []) async throws -> String? {
        try await db.query(sql, params).value(0, "v")
    }
}

struct FixtureError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

func requireValue<T>(_ v: T?, _ what: String = "value") throws -> T {
    guard let v else { throw FixtureError("missing \(what)") }
    return v
}

/// A raw HTTP/1.1 client: sends exactly the request line and headers given (no normalising of
/// `..` or percent escapes), reads to the end.
struct HTTPResponse {
    var status: Int
    var headers: [String: String]
    var body: Data
    var text: String { String(decoding: body, as: UTF8.self) }
}

enum HTTP {
    /// Sends on a thread of its own: a test blocking the cooperative pool would starve the
    /// server's database work, which runs there.
    static func request(
        port: Int, _ method: String, _ target: String, headers: [String: String] = [:], body: Data = Data(), host: String? = nil
    ) async throws -> HTTPResponse {
        try await Blocking.run { try exchange(port: port, method, target, headers: headers, body: body, host: host) }
    }

    static func exchange(
        port: Int, _ method: String, _ target: String, headers: [String: String], body: Data, host: String?
    ) throws -> HTTPResponse {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw FixtureError("socket") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw FixtureError("connect to \(port)") }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var head = "\(method) \(target) HTTP/1.1\r\nHost: \(host ?? "127.0.0.1:\(port)")\r\nConnection: close\r\n"
        var all = headers
        if !body.isEmpty || method == "POST" { all["Content-Length"] = all["Content-Length"] ?? String(body.count) }
        for (k, v) in all.sorted(by: { $0.key < $1.key }) { head += "\(k): \(v)\r\n" }
        var bytes = Data((head + "\r\n").utf8)
        bytes.append(body)
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var received = Data()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received.append(contentsOf: chunk[0..<n])
        }
        guard let split = received.range(of: Data("\r\n\r\n".utf8)) else { throw FixtureError("no response head: \(received.count) bytes") }
        let lines = String(decoding: received[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let status = Int(lines[0].split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            if let colon = line.firstIndex(of: ":") {
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return HTTPResponse(status: status, headers: headers, body: Data(received[split.upperBound...]))
    }

    static func get(_ server: DashboardServer, _ target: String, headers: [String: String] = [:], host: String? = nil) async throws -> HTTPResponse {
        try await request(port: server.port, "GET", target, headers: headers, host: host)
    }

    /// A form post.
    static func post(
        _ server: DashboardServer, _ target: String, _ fields: [(String, String)], headers: [String: String] = [:]
    ) async throws -> HTTPResponse {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let body = fields.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed)!)" }.joined(separator: "&")
        var h = headers
        h["Content-Type"] = "application/x-www-form-urlencoded"
        return try await request(port: server.port, "POST", target, headers: h, body: Data(body.utf8))
    }

    /// The form token in a page.
    static func csrf(in page: String) -> String? {
        guard let r = page.range(of: "name=\"csrf\" value=\"") else { return nil }
        return String(page[r.upperBound...].prefix { $0 != "\"" })
    }
}
