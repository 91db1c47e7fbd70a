import Foundation
import HalcyonFetch
import HalcyonQueue
import HalcyonRuntime
import Testing

/// What `scripts/test` provides: a throwaway PostgreSQL, the test origin, the built binary.
public enum TestEnvironment {
    static let env = ProcessInfo.processInfo.environment

    /// True when the integration environment is there (run through `scripts/test`).
    public static var available: Bool {
        ["HALCYON_TEST_DATABASE_URL", "HALCYON_TEST_ORIGIN", "HALCYON_BIN"].allSatisfy { env[$0] != nil }
    }

    /// True when a PostgreSQL to create databases on is given (`HALCYON_TEST_DATABASE_URL`, which
    /// `scripts/test` sets): enough for the suites that need a database and nothing else
    /// (`QueryFileTests`), which a plain `swift test` then runs too.
    public static var databaseAvailable: Bool { env["HALCYON_TEST_DATABASE_URL"] != nil }

    public static var adminConninfo: String { env["HALCYON_TEST_DATABASE_URL"] ?? "" }
    /// PgBouncer in transaction pooling in front of the same cluster (no dbname: add one).
    public static var pgbouncerConninfo: String? { env["HALCYON_TEST_PGBOUNCER_URL"] }
    public static var origin: String { env["HALCYON_TEST_ORIGIN"] ?? "" }
    /// The origin over IPv6 loopback, `http://[::1]:PORT`: `scripts/test-origin.py` listens on
    /// ::1 beside 127.0.0.1, on the same port, when the host has IPv6 loopback.
    public static var originIPv6: String { origin.replacingOccurrences(of: "http://127.0.0.1:", with: "http://[::1]:") }

    /// Whether this host has IPv6 loopback (a socket binds to ::1).
    public static let ipv6Loopback: Bool = {
        let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_addr = in6addr_loopback
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) == 0 }
        }
    }()

    public static var originRoot: URL { URL(fileURLWithPath: env["HALCYON_TEST_ORIGIN_ROOT"] ?? "/tmp") }
    public static var binary: String { env["HALCYON_BIN"] ?? "halcyon" }
    /// `halcyon-faults` (`Tests/halcyon-faults`: `halcyon` with `HALCYON_TEST_FAULT`), beside
    /// `binary` unless `HALCYON_FAULTS_BIN` names it.
    public static var faultsBinary: String {
        env["HALCYON_FAULTS_BIN"] ?? URL(fileURLWithPath: binary).deletingLastPathComponent().appendingPathComponent("halcyon-faults").path
    }
    /// `HALCYON_MIGRATIONS`, default the repository's `migrations/`.
    public static var migrationsDirectory: URL {
        env["HALCYON_MIGRATIONS"].map { URL(fileURLWithPath: $0) }
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("migrations")
    }

    /// True when `scripts/test` started its S3 server (SeaweedFS) and exported how to reach it.
    public static var s3Available: Bool {
        ["HALCYON_TEST_S3_ENDPOINT", "HALCYON_TEST_S3_ACCESS_KEY", "HALCYON_TEST_S3_SECRET_KEY", "HALCYON_TEST_S3_BUCKET"].allSatisfy {
            !(env[$0] ?? "").isEmpty
        }
    }
    /// The S3 server's endpoint, `http://127.0.0.1:PORT` (path-style addressing).
    public static var s3Endpoint: String { env["HALCYON_TEST_S3_ENDPOINT"] ?? "" }
    /// The key pair `scripts/test` generated for the S3 server.
    public static var s3AccessKey: String { env["HALCYON_TEST_S3_ACCESS_KEY"] ?? "" }
    public static var s3SecretKey: String { env["HALCYON_TEST_S3_SECRET_KEY"] ?? "" }
    /// A bucket created at the server's start (tests share it: use keys of your own).
    public static var s3Bucket: String { env["HALCYON_TEST_S3_BUCKET"] ?? "" }
    /// The AWS variables that reach the test server, as a worker process gets them.
    public static var s3Environment: [String: String] {
        ["AWS_ACCESS_KEY_ID": s3AccessKey, "AWS_SECRET_ACCESS_KEY": s3SecretKey, "AWS_ENDPOINT_URL_S3": s3Endpoint, "AWS_REGION": "us-east-1"]
    }
    /// `s3://BUCKET/PREFIX` for a store of one test's own (a fresh prefix unless given).
    public static func s3StoreURL(prefix: String = "store-\(UUID().uuidString.prefix(8))") -> String {
        "s3://\(s3Bucket)/\(prefix)"
    }

    /// A fresh directory for one test, removed by the caller or with the test run's work dir.
    public static func temporaryDirectory(_ name: String) throws -> URL {
        let base = URL(fileURLWithPath: env["HALCYON_TEST_WORK"] ?? NSTemporaryDirectory())
        let dir = base.appendingPathComponent("\(name)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }
}

/// A database of its own for one test, created on the throwaway cluster and migrated.
public struct TestDatabase: Sendable {
    public let name: String
    public let conninfo: String

    /// A fresh database; `migrated`: with every migration applied. A migrated one is a copy of a
    /// template this test process migrated once (`CREATE DATABASE … TEMPLATE`, a file copy of a
    /// few milliseconds, where running the migrations takes a second or two of the server's CPU).
    public static func create(migrated: Bool = true) async throws -> TestDatabase {
        let template = migrated ? try await migratedTemplate.value : nil
        return try await create(template: template)
    }

    private static func create(template: String?) async throws -> TestDatabase {
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        let admin = try await PGConnection.connect(TestEnvironment.adminConninfo)
        defer { Task { await admin.close() } }
        try await admin.execute("CREATE DATABASE \(name)" + (template.map { " TEMPLATE \($0)" } ?? ""))
        return TestDatabase(name: name, conninfo: TestEnvironment.adminConninfo + " dbname=\(name)")
    }

    /// The migrated template's name: made at first use, migrated, then left without a connection
    /// (a template cannot be copied while someone is connected to it).
    private static let migratedTemplate = Task<String, any Error> {
        let db = try await create(template: nil)
        let c = try await db.connect()
        do {
            try await Migrator.migrate(c, migrations: Migrator.load(from: TestEnvironment.migrationsDirectory))
        } catch {
            await c.close()
            throw error
        }
        await c.close()
        return db.name
    }

    public func connect(statementTimeout: Double? = nil) async throws -> PGConnection {
        try await PGConnection.connect(conninfo, label: "test", statementTimeout: statementTimeout)
    }

    /// Drops the database (its connections ended first), for a test that ran on a server of the
    /// caller's rather than `scripts/test`'s throwaway cluster.
    public func drop() async throws {
        let admin = try await PGConnection.connect(TestEnvironment.adminConninfo)
        defer { Task { await admin.close() } }
        try await admin.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    /// Runs one query on a short-lived connection.
    @discardableResult
    public func query(_ sql: String, _ params: [String?] = []) async throws -> PGRows {
        let c = try await connect()
        defer { Task { await c.close() } }
        return try await c.execute(sql, params)
    }
}

/// The test origin: put files where it serves them, read its request counts.
public enum Origin {
    /// Writes `data` under the origin root and returns its `/files/NAME` URL.
    @discardableResult
    public static func publish(_ name: String, _ data: Data) throws -> String {
        // Atomically: suites republish the same file, and a reader must never see it empty.
        try data.write(to: TestEnvironment.originRoot.appendingPathComponent(name), options: .atomic)
        return "\(TestEnvironment.origin)/files/\(name)"
    }

    /// Request counts by path+query since the origin started.
    public static func counts() throws -> [String: Int] {
        guard case .object(let o)? = JSONValue.parse(try get("\(TestEnvironment.origin)/_counts")) else { return [:] }
        return o.compactMapValues { $0.numberValue.map { Int($0) } }
    }

    /// The body of a GET to a loopback URL (the origin, a worker's metrics endpoint), as text.
    public static func get(_ url: String) throws -> String {
        var c = FetchConfiguration()
        c.maxBytes = 64 << 20
        c.addressPolicy = AddressPolicy(allowed: [CIDR("127.0.0.1/32")!])
        let body = try HTTPClient(configuration: c).get(URL(string: url)!, cancel: CancellationFlag()).body
        return String(decoding: body, as: UTF8.self)
    }
}

/// A file of `Tests/Fixtures/public/` (other projects' public test images, with their licences).
public func publicFixture(_ relativePath: String) -> URL {
    // This file is Tests/HalcyonTestSupport/TestEnvironment.swift.
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/public").appendingPathComponent(relativePath)
}

/// Runs scripts/test's Python (`HALCYON_TEST_PYTHON`, a venv with the reference libraries) on
/// `script` with `arguments` and returns what it printed; a Python that fails fails the test,
/// with its standard error.
public func referencePython(_ script: String, _ arguments: [String]) throws -> String {
    let python = try #require(
        ProcessInfo.processInfo.environment["HALCYON_TEST_PYTHON"], "scripts/test sets HALCYON_TEST_PYTHON (a venv with the references)")
    let p = Process()
    p.executableURL = URL(fileURLWithPath: python)
    p.arguments = ["-c", script] + arguments
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.run()
    // A backstop, so that a Python that hangs fails its test instead of holding the suite.
    let pid = p.processIdentifier
    let watchdog = DispatchWorkItem { kill(pid, SIGKILL) }
    DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(600), execute: watchdog)
    defer { watchdog.cancel() }
    let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    p.waitUntilExit()
    try #require(p.terminationStatus == 0, "python (status \(p.terminationStatus), killed after 600 s when 9): \(errors)")
    return text
}
