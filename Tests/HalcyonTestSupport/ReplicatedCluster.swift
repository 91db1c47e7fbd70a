import Foundation
import HalcyonEmbedded

/// A PostgreSQL primary and a streaming standby of it (`pg_basebackup -R`), each on a loopback
/// TCP port of its own, for failover tests: `conninfo` names both hosts, and libpq picks the
/// one that accepts writes (`target_session_attrs=read-write`). Under root the servers run as
/// the `postgres` user, as the embedded cluster's do.
public final class ReplicatedCluster: Sendable {
    public let directory: URL
    public let primaryPort: Int
    public let standbyPort: Int
    private let bin: String
    private var primary: URL { directory.appendingPathComponent("primary") }
    private var standby: URL { directory.appendingPathComponent("standby") }
    private var sockets: URL { directory.appendingPathComponent("run") }

    /// Both hosts, the writable one chosen at each connect.
    public var conninfo: String {
        "postgresql://postgres@127.0.0.1:\(primaryPort),127.0.0.1:\(standbyPort)/postgres?target_session_attrs=read-write&connect_timeout=3"
    }
    /// The primary alone, and the standby alone (read-only until promoted).
    public var primaryConninfo: String { "host=127.0.0.1 port=\(primaryPort) user=postgres dbname=postgres connect_timeout=3" }
    public var standbyConninfo: String { "host=127.0.0.1 port=\(standbyPort) user=postgres dbname=postgres connect_timeout=3" }

    /// Initialises and starts the primary, copies it into a standby that streams from it, and
    /// starts that. The directory is under /tmp (a short path every user can traverse).
    public init() throws {
        bin = try EmbeddedCluster.binDirectory()
        directory = URL(fileURLWithPath: "/tmp/halcyon-failover-\(UUID().uuidString.prefix(8))")
        let first = try Self.freePort()
        var second = try Self.freePort()
        while second == first { second = try Self.freePort() }
        (primaryPort, standbyPort) = (first, second)
        try FileManager.default.createDirectory(at: sockets, withIntermediateDirectories: true)
        do {
            try build()
        } catch {
            // Whatever started is stopped: no server outlives a failed set-up.
            remove()
            throw error
        }
    }

    private func build() throws {
        try handOver(directory)
        try handOver(sockets)
        try tool("initdb", ["-D", primary.path, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"])
        try append(
            to: primary,
            """
            listen_addresses = '127.0.0.1'
            port = \(primaryPort)
            unix_socket_directories = '\(sockets.path)'
            max_connections = 60
            fsync = off
            """)
        try start(primary)
        try tool("pg_basebackup", ["-h", "127.0.0.1", "-p", "\(primaryPort)", "-U", "postgres", "-D", standby.path, "-R", "-X", "stream"])
        // A promoted standby must not wait for a standby of its own that does not exist.
        try append(to: standby, "port = \(standbyPort)\nsynchronous_standby_names = ''")
        try start(standby)
    }

    /// Stops the primary: `immediate` is a crash (no checkpoint, clients cut off).
    public func stopPrimary(mode: String = "immediate") throws {
        try tool("pg_ctl", ["-D", primary.path, "-m", mode, "-w", "stop"], allowFailure: true)
    }

    /// Promotes the standby to a primary and waits until it accepts writes.
    public func promoteStandby() throws {
        try tool("pg_ctl", ["-D", standby.path, "-w", "-t", "60", "promote"])
    }

    /// Stops both servers and removes their files.
    public func remove() {
        for data in [primary, standby] { try? tool("pg_ctl", ["-D", data.path, "-m", "immediate", "-w", "stop"], allowFailure: true) }
        try? FileManager.default.removeItem(at: directory)
    }

    private func start(_ data: URL) throws {
        try tool("pg_ctl", ["-D", data.path, "-l", data.path + ".log", "-w", "-t", "60", "start"])
    }

    private func append(to data: URL, _ settings: String) throws {
        let handle = try FileHandle(forWritingTo: data.appendingPathComponent("postgresql.conf"))
        handle.seekToEndOfFile()
        handle.write(Data(("\n" + settings + "\n").utf8))
        try handle.close()
    }

    private var runAsPostgres: Bool { geteuid() == 0 }

    private func handOver(_ path: URL) throws {
        guard runAsPostgres else { return }
        guard let pw = getpwnam("postgres") else { throw ReplicatedClusterError("running as root needs a 'postgres' user") }
        chown(path.path, pw.pointee.pw_uid, pw.pointee.pw_gid)
        chmod(path.path, 0o700)
    }

    private func tool(_ name: String, _ arguments: [String], allowFailure: Bool = false) throws {
        let path = bin + "/" + name
        let (executable, args) = runAsPostgres ? ("/usr/sbin/runuser", ["-u", "postgres", "--", path] + arguments) : (path, arguments)
        let output = directory.appendingPathComponent("\(name)-\(UUID().uuidString.prefix(6)).out").path
        let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PG") }
        let status = try Subprocess.run(executable, args, outputPath: output, environment: environment)
        if status != 0 && !allowFailure {
            let text = String(decoding: FileManager.default.contents(atPath: output) ?? Data(), as: UTF8.self)
            throw ReplicatedClusterError("\(name) failed (exit \(status)): \(text.suffix(1500))")
        }
    }

    /// A TCP port nothing listens on now (the kernel's choice for an ephemeral bind).
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ReplicatedClusterError("socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw ReplicatedClusterError("bind: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

public struct ReplicatedClusterError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
