import Foundation

/// The embedded default database: a private PostgreSQL cluster under `$HALCYON_HOME/pg`,
/// initialised and started on demand, listening only on a Unix socket. PostgreSQL refuses to
/// run as root, so under root the server runs as the `postgres` user.
///
/// Private to the user who runs it: the cluster trusts every connection that reaches its
/// socket, so the socket's directory — and `pg/` with the data, the log and the socket when it
/// fits there — is mode 0700 and owned by the user the server runs as, checked at every start
/// (an existing directory that is a symlink, someone else's, or open to others is refused).
public struct EmbeddedCluster: Sendable {
    public let home: URL
    public var dataDirectory: URL { home.appendingPathComponent("pg/data") }
    public var logFile: URL { home.appendingPathComponent("pg/postgres.log") }
    /// Where the socket directory is recorded when it is not inside `pg/`.
    var socketRecord: URL { home.appendingPathComponent("pg/socket-dir") }

    /// The socket directory: `pg/run` inside the cluster, unless that path is too long for a
    /// Unix socket (108 bytes); then a directory of a random name under `$XDG_RUNTIME_DIR` or
    /// /tmp, chosen when the cluster is created and recorded in `pg/socket-dir`.
    public var socketDirectory: URL {
        let inside = home.appendingPathComponent("pg/run")
        if Self.fitsASocket(inside.path) { return inside }
        if let recorded = try? String(contentsOf: socketRecord, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines),
            recorded.hasPrefix("/")
        {
            return URL(fileURLWithPath: recorded)
        }
        return legacySocketDirectory
    }

    /// Where clusters made before `pg/socket-dir` existed put their socket (its name is
    /// predictable, so it is only used after the same ownership checks as any other).
    private var legacySocketDirectory: URL {
        // FNV-1a: stable across processes, unlike hashValue.
        let hash = home.path.utf8.reduce(UInt64(0xcbf29ce484222325)) { ($0 ^ UInt64($1)) &* 0x100000001b3 }
        let tag = String(hash, radix: 36).prefix(8)
        return URL(fileURLWithPath: "/tmp/halcyon-\(getuid())-\(tag)")
    }

    static func fitsASocket(_ directory: String) -> Bool { directory.utf8.count + 16 < 100 }

    /// A fresh socket directory of an unpredictable name, for a cluster whose `pg/run` is too long.
    private func newFallbackSocketDirectory() -> URL {
        let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"].flatMap {
            $0.hasPrefix("/") && Self.fitsASocket($0 + "/halcyon-0123456789ab") ? $0 : nil
        }
        let tag = (0..<12).map { _ in "abcdefghijklmnopqrstuvwxyz0123456789".randomElement()! }
        return URL(fileURLWithPath: runtime ?? "/tmp").appendingPathComponent("halcyon-\(String(tag))")
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

    /// The libpq connection string for the cluster (the socket path quoted: it may hold spaces).
    public var conninfo: String {
        "host=\(Self.quoteConninfo(socketDirectory.path)) port=\(port) user=postgres dbname=postgres"
    }

    /// A libpq connection-string value in single quotes, `\` and `'` escaped.
    static func quoteConninfo(_ value: String) -> String {
        "'" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }

    /// `unix_socket_directories`' value in postgresql.conf: a list whose entries may be double-
    /// quoted (for spaces and commas), inside the setting's single quotes.
    static func socketDirectoriesSetting(_ path: String) -> String {
        let listEntry = "\"" + path.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        return "'" + listEntry.replacingOccurrences(of: "'", with: "''") + "'"
    }

    private var runAsPostgres: Bool { geteuid() == 0 }

    /// Whether the cluster has been initialised (it may be stopped): commands that only read
    /// use it then, and create nothing when it is not.
    public var exists: Bool { FileManager.default.fileExists(atPath: dataDirectory.appendingPathComponent("PG_VERSION").path) }

    /// Initialises (first time) and starts (when down) the cluster. Safe to call from several
    /// processes at once: they serialise on a lock file. True when this call initialised it.
    @discardableResult
    public func ensureRunning() throws -> Bool {
        let fm = FileManager.default
        try fm.createDirectory(at: home, withIntermediateDirectories: true)
        let pg = home.appendingPathComponent("pg")
        if mkdir(pg.path, 0o700) != 0 && errno != EEXIST { throw failure("cannot create \(pg.path): \(String(cString: strerror(errno)))") }
        if !runAsPostgres { chmod(pg.path, 0o700) }  // also for clusters made before this was private
        let lockFD = open(home.appendingPathComponent("pg/lock").path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard lockFD >= 0 else { throw failure("cannot open \(home.path)/pg/lock") }
        defer { close(lockFD) }
        flock(lockFD, LOCK_EX)
        defer { flock(lockFD, LOCK_UN) }

        let bin = try Self.binDirectory()
        if runAsPostgres { try checkPostgresCanReach() }
        let initialising = !exists
        if initialising {
            try? fm.removeItem(at: dataDirectory)
            try fm.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
            if !Self.fitsASocket(home.appendingPathComponent("pg/run").path) {
                try Data((newFallbackSocketDirectory().path + "\n").utf8).write(to: socketRecord)
            }
            try makePrivateDirectory(socketDirectory)
            try handOver([dataDirectory, pg])
            // trust: only the server's own user (and root) can reach the socket's directory.
            try runServerTool(
                bin + "/initdb", ["-D", dataDirectory.path, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"], what: "initdb")
            let settings = """

                # Halcyon embedded cluster: Unix socket only, in a directory only its user can enter.
                listen_addresses = ''
                unix_socket_directories = \(Self.socketDirectoriesSetting(socketDirectory.path))
                unix_socket_permissions = 0700
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
            return initialising
        }
        try makePrivateDirectory(socketDirectory)
        if !fm.fileExists(atPath: logFile.path) { _ = fm.createFile(atPath: logFile.path, contents: nil, attributes: [.posixPermissions: 0o600]) }
        try handOver([logFile])
        try runServerTool(bin + "/pg_ctl", ["-D", dataDirectory.path, "-l", logFile.path, "-w", "-t", "60", "start"], what: "pg_ctl start")
        return initialising
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
        throw EmbeddedClusterError(
            message: "PostgreSQL server binaries not found (install the 'postgresql' package, e.g. scripts/setup) or pass --database-url")
    }

    // MARK: Private

    private func checkPostgresCanReach() throws {
        // Every ancestor of HALCYON_HOME must be searchable by the postgres user.
        var dir = home
        while dir.path != "/" {
            var st = stat()
            if stat(dir.path, &st) == 0, st.st_mode & 0o001 == 0, st.st_uid != Self.postgresUID() {
                throw EmbeddedClusterError(
                    message:
                        "running as root, the embedded cluster runs as 'postgres', which cannot enter \(dir.path); set HALCYON_HOME to a directory it can reach (e.g. /var/tmp/halcyon) or pass --database-url"
                )
            }
            dir = dir.deletingLastPathComponent()
        }
    }

    private static func postgresUID() -> uid_t {
        getpwnam("postgres")?.pointee.pw_uid ?? 0
    }

    /// The uid the server runs as.
    private var serverUID: uid_t { runAsPostgres ? Self.postgresUID() : geteuid() }

    /// Creates `directory` mode 0700 for the server's user, or checks that the one already there
    /// is exactly that: a real directory (not a symlink), owned by that user, closed to others.
    /// A directory someone else made (e.g. a predictable name in /tmp) is refused, not used.
    func makePrivateDirectory(_ directory: URL) throws {
        let path = directory.path
        try FileManager.default.createDirectory(at: directory.deletingLastPathComponent(), withIntermediateDirectories: true)
        if mkdir(path, 0o700) == 0 {
            if runAsPostgres {
                let pw = getpwnam("postgres")
                guard let pw else {
                    throw failure("running as root needs a 'postgres' user to run the embedded cluster (install the 'postgresql' package)")
                }
                chown(path, pw.pointee.pw_uid, pw.pointee.pw_gid)
            }
            chmod(path, 0o700)
            return
        }
        guard errno == EEXIST else { throw failure("cannot create \(path): \(String(cString: strerror(errno)))") }
        var st = stat()
        guard lstat(path, &st) == 0 else { throw failure("cannot inspect \(path): \(String(cString: strerror(errno)))") }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            throw failure("\(path) exists and is not a directory (a symlink?); refusing to put the cluster's socket there — remove it")
        }
        guard st.st_uid == serverUID else {
            throw failure("\(path) belongs to uid \(st.st_uid), not to the cluster's user (uid \(serverUID)); refusing to use it — remove it")
        }
        if st.st_mode & 0o077 != 0 {
            // Ours but open to others (made by an older version): close it.
            guard chmod(path, 0o700) == 0 else { throw failure("cannot make \(path) private: \(String(cString: strerror(errno)))") }
        }
    }

    private func handOver(_ paths: [URL]) throws {
        guard runAsPostgres else { return }
        guard let pw = getpwnam("postgres") else {
            throw EmbeddedClusterError(
                message: "running as root needs a 'postgres' user to run the embedded cluster (install the 'postgresql' package)")
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
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("halcyon-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).out")
            .path
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        // libpq's variables set but empty are "not set" to Halcyon (they chose this cluster), but
        // PostgreSQL's own tools read them: an empty PGPORT is an invalid port to initdb.
        let environment = ProcessInfo.processInfo.environment.filter { !($0.key.hasPrefix("PG") && $0.value.isEmpty) }
        let status = try Subprocess.run(path, arguments, outputPath: outputPath, environment: environment)
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
