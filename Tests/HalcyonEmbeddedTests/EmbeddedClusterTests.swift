import Foundation
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

@testable import HalcyonEmbedded

/// The embedded cluster trusts whoever reaches its socket, so only its own user may: the socket
/// directory is private (0700, the server's user), checked at every start, and any HALCYON_HOME
/// — spaces, long paths — works.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL binaries)"), .serialized, .processes)
struct EmbeddedClusterTests {
    var serverUID: uid_t { geteuid() == 0 ? (getpwnam("postgres")?.pointee.pw_uid ?? 0) : geteuid() }

    func mode(_ path: String) -> (mode: mode_t, uid: uid_t, isDirectory: Bool)? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return (st.st_mode & 0o777, st.st_uid, st.st_mode & S_IFMT == S_IFDIR)
    }

    func home(long: Bool) throws -> URL {
        var url = try TestEnvironment.temporaryDirectory("embedded").appendingPathComponent("with space")
        if long { url = url.appendingPathComponent(String(repeating: "a-long-directory-name/", count: 5)) }
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url.appendingPathComponent("home")
    }

    @Test(arguments: [false, true])
    func aClusterInAHomeWithASpaceIsPrivateToItsUser(long: Bool) async throws {
        let cluster = EmbeddedCluster(home: try home(long: long))
        try await cluster.started()
        defer { try? cluster.stop(mode: "immediate") }
        let c = try await PGConnection.connect(cluster.conninfo)
        #expect(try await c.execute("SELECT 1 AS one").value(0, "one") == "1")
        await c.close()

        let socket = cluster.socketDirectory.path
        #expect(socket.hasPrefix(cluster.home.path) == !long, "\(socket)")
        let s = try #require(mode(socket))
        #expect(s.isDirectory && s.mode == 0o700 && s.uid == serverUID, "socket directory \(socket): \(s)")
        #expect(mode(cluster.home.appendingPathComponent("pg").path)?.mode == 0o700)
        if long {
            // Not the predictable /tmp/halcyon-<uid>-<hash> of old: a random name, recorded.
            #expect(!socket.contains("halcyon-\(getuid())-"))
            let recorded = try String(contentsOf: cluster.home.appendingPathComponent("pg/socket-dir"), encoding: .utf8)
            #expect(recorded.trimmingCharacters(in: .whitespacesAndNewlines) == socket)
        }
    }

    /// Whether this run can act as another user: root, with `nobody` and `runuser` (CI runs as
    /// root). The tests that need it are skipped — and reported so — otherwise, never passed
    /// with their check left out.
    static var canSwitchUsers: Bool {
        geteuid() == 0 && getpwnam("nobody") != nil && FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser")
    }

    /// Another local user (`nobody`, through `runuser`) cannot reach the cluster's socket; the
    /// cluster's own user can, the same way.
    @Test(.enabled(if: canSwitchUsers, "needs root, the user nobody and runuser"), arguments: [false, true])
    func anotherUserCannotReachTheSocket(long: Bool) async throws {
        let cluster = EmbeddedCluster(home: try home(long: long))
        try await cluster.started()
        defer { try? cluster.stop(mode: "immediate") }
        let psql = try EmbeddedCluster.binDirectory() + "/psql"
        let conninfo = cluster.conninfo
        func psqlAs(_ user: String) async throws -> (status: Int32, said: String) {
            let out = try TestEnvironment.temporaryDirectory("psql").appendingPathComponent("out").path
            let status = try await Blocking.run {
                try Subprocess.run("/usr/sbin/runuser", ["-u", user, "--", psql, conninfo, "-Atc", "SELECT 1"], outputPath: out)
            }
            return (status, (try? String(contentsOfFile: out, encoding: .utf8)) ?? "")
        }
        let nobody = try await psqlAs("nobody")
        #expect(
            nobody.status != 0 && nobody.said.contains("Permission denied"), "another user reached the cluster: exit \(nobody.status), \(nobody.said)"
        )
        // The same command as the server's own user gets in: what refused nobody is the socket's permissions.
        let owner = try #require(getpwuid(serverUID)).pointee.pw_name.map { String(cString: $0) } ?? "root"
        let own = try await psqlAs(owner)
        #expect(own.status == 0 && own.said.contains("1"), "the cluster's own user \(owner) could not connect: exit \(own.status), \(own.said)")
    }

    /// A socket directory someone else made — a symlink, another user's — is refused at start,
    /// not used; one of ours that is open to others is closed.
    @Test func aSocketDirectoryThatIsNotPrivateIsRefusedOrClosed() async throws {
        let cluster = EmbeddedCluster(home: try home(long: true))
        try await cluster.started()
        defer { try? cluster.stop(mode: "immediate") }
        try await cluster.stopped()
        let socket = cluster.socketDirectory.path

        chmod(socket, 0o777)
        try await cluster.started()
        #expect(mode(socket)?.mode == 0o700)
        try await cluster.stopped()

        let elsewhere = try TestEnvironment.temporaryDirectory("attacker")
        #expect(rmdir(socket) == 0)
        #expect(symlink(elsewhere.path, socket) == 0)
        #expect { try cluster.ensureRunning() } throws: { "\($0)".contains("not a directory") }
        unlink(socket)

        try await cluster.started()
        #expect(mode(socket)?.mode == 0o700)
    }

    /// A socket directory that belongs to another user (made here by root for `nobody`) is
    /// refused at start.
    @Test(.enabled(if: canSwitchUsers, "needs root (to make a directory another user owns)"))
    func anotherUsersSocketDirectoryIsRefused() async throws {
        let cluster = EmbeddedCluster(home: try home(long: true))
        try await cluster.started()
        defer { try? cluster.stop(mode: "immediate") }
        try await cluster.stopped()
        let socket = cluster.socketDirectory.path
        let nobody = try #require(getpwnam("nobody"))
        #expect(rmdir(socket) == 0)
        #expect(mkdir(socket, 0o700) == 0)
        #expect(chown(socket, nobody.pointee.pw_uid, nobody.pointee.pw_gid) == 0)
        #expect { try cluster.ensureRunning() } throws: { "\($0)".contains("belongs to uid") }
        rmdir(socket)
        try await cluster.started()
        #expect(mode(socket)?.mode == 0o700)
    }

    @Test func conninfoAndConfigurationQuoteAnyPath() {
        #expect(EmbeddedCluster.quoteConninfo("/a b/it's\\x") == "'/a b/it\\'s\\\\x'")
        #expect(EmbeddedCluster.socketDirectoriesSetting("/a b,c/it's \"q\"") == "'\"/a b,c/it''s \"\"q\"\"\"'")
    }
}
