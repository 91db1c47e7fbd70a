import Foundation
import HalcyonCore

/// The embedded default database: a private PostgreSQL cluster under `$HALCYON_HOME/pg`,
/// initialised and started on demand, listening only on a Unix socket. PostgreSQL refuses to
/// run as root, so under root the server runs as the `postgres` user.
public struct EmbeddedCluster: Sendable {
    public let home: URL
    public var dataDirectory: URL { home.appendingPathComponent("pg/data") }
    public var logFile: URL { home.appendingPathComponent("pg/postgres.log") }
    /// The socket directory: inside the cluster, unless that path is too long for a Unix socket.
    public var socketDirectory: URL {
        let inside = home.appendingPathComponent("pg/run")
        if inside.path.utf8.count + 16 < 100 { return inside }
        // FNV-1a: stable across processes, unlike hashValue.
        let hash = home.path.utf8.reduce(UInt64(0xcbf29ce484222325)) { ($0 ^ UInt64($1)) &* 0x100000001b3 }
        let tag = String(hash, radix: 36).prefix(8)
        return URL(fileURLWithPath: "/tmp/halcyon-\(getuid())-\(tag)")
    }
    public let port = 5432

    /// `$HALCYON_HOME`, default `./.halcyon`.
    public static func defaultHome() -> URL {
        let env = ProcessInfo.processInfo.environment["HALCYON_HOME"].flatMap { $0.isEmpty ? nil : $0 }
        return URL(fileURLWithPath: env ?? ".halcyon").standardizedFileURL
    }

    public init(home: URL = EmbeddedCluster.defaultHome()) {
        self.home = home.standardizedFileURL
    }

    /// The libpq connection string for the cluster.
    public var conninfo: String {
        "host=\(socketDirectory.path) port=\(port) user=postgres dbname=postgres"
    }

    private var runAsPostgres: Bool { geteuid() == 0 }

    /// Initialises (first time) and starts (when down) the cluster. Safe to call from several
    /// processes at once: they serialise on a lock file.
    public func ensureRunning() throws {
        let fm = FileManager.default
        try fm.createDirectory(at: home.appendingPathComponent("pg"), withIntermediateDirectories: true)
        let lockFD = open(home.appendingPathComponent("pg/lock").path, O_CREAT | O_RDWR | O_CLOEXEC, 0o644)
        guard lockFD >= 0 else { throw failure("cannot open \(home.path)/pg/lock") }
        defer { close(lockFD) }
        flock(lockFD, LOCK_EX)
        defer { flock(lockFD, LOCK_UN) }

        let bin = try Self.binDirectory()
        if runAsPostgres { try checkPostgresCanReach() }
        if !fm.fileExists(atPath: dataDirectory.appendingPathComponent("PG_VERSION").path) {
            try? fm.removeItem(at: dataDirectory)
            try fm.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
            try fm.createDirectory(at: socketDirectory, withIntermediateDirectories: true)
            try handOver([dataDirectory, socketDirectory, home.appendingPathComponent("pg")])
            try runServerTool(bin + "/initdb", ["-D", dataDirectory.path, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"], what: "initdb")
            let settings = """

                # Halcyon embedded cluster: Unix socket only.
                listen_addresses = ''
                unix_socket_directories = '\(socketDirectory.path)'
                port = \(port)
                max_connections = 200
                shared_buffers = 128MB
                """
            let conf = dataDirectory.appendingPathComponent("postgresql.conf")
            let handle = try FileHandle(forWritingTo: conf)
            handle.seekToEndOfFile()
            handle.write(Data(settings.utf8))
            try handle.close()
        }
        if try runServerTool(bin + "/pg_ctl", ["-D", dataDirectory.path, "status"], what: "pg_ctl status", allowFailure: true) == 0 {
            return
        }
        try fm.createDirectory(at: socketDirectory, withIntermediateDirectories: true)
        if !fm.fileExists(atPath: logFile.path) { _ = fm.createFile(atPath: logFile.path, contents: nil) }
        try handOver([socketDirectory, logFile])
        try runServerTool(bin + "/pg_ctl", ["-D", dataDirectory.path, "-l", logFile.path, "-w", "-t", "60", "start"], what: "pg_ctl start")
    }

    /// Stops the cluster if it runs: `fast` (disconnect clients, checkpoint) or `immediate`
    /// (abort; crash recovery at the next start).
    public func stop(mode: String = "fast") throws {
        let bin = try Self.binDirectory()
        guard FileManager.default.fileExists(atPath: dataDirectory.appendingPathComponent("PG_VERSION").path) else { return }
        try runServerTool(bin + "/pg_ctl", ["-D", dataDirectory.path, "-m", mode, "-w", "stop"], what: "pg_ctl stop", allowFailure: true)
    }

    /// PostgreSQL's server binaries: the newest `/usr/lib/postgresql/N/bin`, or `initdb` on PATH.
    public static func binDirectory() throws -> String {
        let base = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: base)) ?? []).compactMap(Int.init).sorted()
        for v in versions.reversed() where FileManager.default.isExecutableFile(atPath: "\(base)/\(v)/bin/initdb") {
            return "\(base)/\(v)/bin"
        }
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":")
        where FileManager.default.isExecutableFile(atPath: "\(dir)/initdb") {
            return String(dir)
        }
        throw EmbeddedClusterError(message: "PostgreSQL server binaries not found (install the 'postgresql' package, e.g. scripts/setup) or pass --database-url")
    }

    // MARK: Private

    private func checkPostgresCanReach() throws {
        // Every ancestor of HALCYON_HOME must be searchable by the postgres user.
        var dir = home
        while dir.path != "/" {
            var st = stat()
            if stat(dir.path, &st) == 0, st.st_mode & 0o001 == 0, st.st_uid != Self.postgresUID() {
                throw EmbeddedClusterError(message: "running as root, the embedded cluster runs as 'postgres', which cannot enter \(dir.path); set HALCYON_HOME to a directory it can reach (e.g. /var/tmp/halcyon) or pass --database-url")
            }
            dir = dir.deletingLastPathComponent()
        }
    }

    private static func postgresUID() -> uid_t {
        getpwnam("postgres")?.pointee.pw_uid ?? 0
    }

    private func handOver(_ paths: [URL]) throws {
        guard runAsPostgres else { return }
        guard let pw = getpwnam("postgres") else {
            throw EmbeddedClusterError(message: "running as root needs a 'postgres' user to run the embedded cluster (install the 'postgresql' package)")
        }
        for p in paths {
            chown(p.path, pw.pointee.pw_uid, pw.pointee.pw_gid)
            if p.hasDirectoryPath || (try? p.resourceValues(forKeys: [.isDirectoryKey]).isDirectory) == true {
                chmod(p.path, 0o700)
            }
        }
    }

    @discardableResult
    private func runServerTool(_ tool: String, _ args: [String], what: String, allowFailure: Bool = false) throws -> Int32 {
        let (path, arguments) = runAsPostgres ? ("/usr/sbin/runuser", ["-u", "postgres", "--", tool] + args) : (tool, args)
        // A file, not a pipe: the server pg_ctl starts inherits the descriptor and would hold
        // a pipe open forever.
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("halcyon-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).out").path
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        let status = try Subprocess.run(path, arguments, outputPath: outputPath)
        if status != 0 && !allowFailure {
            let output = String(decoding: FileManager.default.contents(atPath: outputPath) ?? Data(), as: UTF8.self)
            throw EmbeddedClusterError(message: "\(what) failed (exit \(status)): \(output.suffix(2000)) — see \(logFile.path)")
        }
        return status
    }

    private func failure(_ message: String) -> EmbeddedClusterError {
        EmbeddedClusterError(message: message)
    }
}

public struct EmbeddedClusterError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { "embedded database: \(message)" }
}
