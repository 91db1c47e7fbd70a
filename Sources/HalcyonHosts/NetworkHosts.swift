import Foundation
import HalcyonEmbedded
import HalcyonRuntime

/// "Hosts" for a test or the bench's X: Linux network namespaces, each joined to the root namespace by a veth
/// pair of its own on a /30 of a private 10.213.X.0/24 picked by pid (one not routed here
/// yet). A host reaches the root namespace only through its own pair, at the root-side
/// addresses (its own, and the others' through its own link); what runs
/// there (PostgreSQL, the S3 server, the origin) is put on those addresses by a
/// `TCPForwarder`. Names carry the creating process's pid (`hc-PID-a`, veths `hcPIDa`/`hcPIDap`),
/// so a run removes what a crashed run left (a dead pid's, or its own pid's) before it starts.
/// Needs root and `ip netns`.
public final class NetworkHosts: Sendable {
    public struct Host: Sendable {
        /// The namespace's name (`ip netns exec NAME …`).
        public let name: String
        /// The root side's address: where this host reaches the services.
        public let rootAddress: String
        /// The host's own address, inside its namespace.
        public let address: String
        /// The veth pair's ends: in the root namespace and in the host's.
        public let rootLink: String
        public let hostLink: String
    }

    public let hosts: [Host]
    /// The /24 the hosts' /30s are carved from (what a worker's `--allow-network` names).
    public let subnet: String

    static let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static let setsid = ["/usr/bin/setsid", "/bin/setsid"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Nil when hosts can be made here; otherwise why not (the reason a test or the bench's X is skipped with).
    public static let unavailableReason: String? = {
        guard getuid() == 0 else { return "needs root (network namespaces and veth pairs)" }
        guard let ip else { return "needs iproute2's ip" }
        guard setsid != nil else { return "needs util-linux's setsid" }
        guard (try? command(ip, ["netns", "list"])) != nil else { return "ip netns is unavailable here" }
        return nil
    }()

    private init(hosts: [Host], subnet: String) {
        self.hosts = hosts
        self.subnet = subnet
    }

    /// Makes `count` hosts (at most 26): a namespace each with loopback up, joined to the root
    /// namespace by a veth pair, both ends up and addressed. On failure what was made is removed.
    public static func create(count: Int) throws -> NetworkHosts {
        guard let ip, unavailableReason == nil else { throw failure("network hosts: \(unavailableReason ?? "unavailable")") }
        precondition((1...26).contains(count))
        removeStale()
        let pid = getpid()
        let routes = (try? command(ip, ["-4", "route", "show", "table", "all"])) ?? ""
        let addresses = (try? command(ip, ["-4", "-o", "addr", "show"])) ?? ""
        // A /24 of 10.213.0.0/16 by pid, or the next one no route or address here names.
        guard
            let third = (0..<256).map({ (Int(pid) + $0) % 256 }).first(where: { n in
                !routes.contains("10.213.\(n).") && !addresses.contains("10.213.\(n).")
            })
        else { throw failure("network hosts: no free /24 in 10.213.0.0/16") }
        let hosts = (0..<count).map { i in
            let letter = String(UnicodeScalar(UInt8(97 + i)))
            return Host(
                name: "hc-\(pid)-\(letter)", rootAddress: "10.213.\(third).\(4 * i + 1)", address: "10.213.\(third).\(4 * i + 2)",
                rootLink: "hc\(pid)\(letter)", hostLink: "hc\(pid)\(letter)p")
        }
        let made = NetworkHosts(hosts: hosts, subnet: "10.213.\(third).0/24")
        do {
            for h in hosts {
                try command(ip, ["netns", "add", h.name])
                try command(ip, ["link", "add", h.rootLink, "type", "veth", "peer", "name", h.hostLink, "netns", h.name])
                try command(ip, ["addr", "add", "\(h.rootAddress)/30", "dev", h.rootLink])
                try command(ip, ["link", "set", h.rootLink, "up"])
                try command(ip, ["-n", h.name, "addr", "add", "\(h.address)/30", "dev", h.hostLink])
                try command(ip, ["-n", h.name, "link", "set", h.hostLink, "up"])
                try command(ip, ["-n", h.name, "link", "set", "lo", "up"])
                // The rest of the /24 through this host's own link: a host reaches another's
                // root-side address too (one URL in a row serves every host).
                try command(ip, ["-n", h.name, "route", "add", made.subnet, "via", h.rootAddress])
            }
        } catch {
            made.tearDown()
            throw error
        }
        return made
    }

    /// Kills every process left in the hosts' namespaces and removes the namespaces and the
    /// veth pairs. Safe to call more than once.
    public func tearDown() {
        for h in hosts { Self.remove(namespace: h.name, rootLink: h.rootLink) }
    }

    /// The processes in `host`'s namespace.
    public func pids(in host: Host) -> [pid_t] {
        Self.pids(inNamespace: host.name)
    }

    /// How to start `executable ARGS` on `host`, in a session (and process group) of its own,
    /// so that killing the group kills everything it started, as a host dying would: pass the
    /// result to `HalcyonProcess(…, executable:)` or `Subprocess.spawn`.
    public func launcher(on host: Host, _ executable: String) -> (executable: String, arguments: [String]) {
        // setsid execs in place (a spawned child is not a group leader, so it does not fork),
        // and so does `ip netns exec`: the pid started is the program's own.
        (Self.setsid ?? "/usr/bin/setsid", [Self.ip ?? "ip", "netns", "exec", host.name, executable])
    }

    /// Runs `executable ARGS` on `host` to completion: its exit status and its output.
    public func run(on host: Host, _ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("hc-run-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        let status = try Subprocess.run(Self.ip ?? "ip", ["netns", "exec", host.name, executable] + arguments, outputPath: log.path)
        return (status, (try? String(contentsOf: log, encoding: .utf8)) ?? "")
    }

    // MARK: - Commands

    /// Runs `path ARGS`; returns its output, or throws with it when the exit status is not 0.
    @discardableResult
    static func command(_ path: String, _ arguments: [String]) throws -> String {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("hc-ip-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        let status = try Subprocess.run(path, arguments, outputPath: log.path)
        let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        guard status == 0 else { throw failure("\(path) \(arguments.joined(separator: " ")): exit \(status): \(output)") }
        return output
    }

    static func failure(_ message: String) -> Error {
        CocoaError(.featureUnsupported, userInfo: [NSLocalizedDescriptionKey: message])
    }

    static func pids(inNamespace name: String) -> [pid_t] {
        guard let ip, let out = try? command(ip, ["netns", "pids", name]) else { return [] }
        return out.split(whereSeparator: \.isWhitespace).compactMap { pid_t($0) }
    }

    static func remove(namespace: String, rootLink: String) {
        guard let ip else { return }
        for pid in pids(inNamespace: namespace) { kill(pid, SIGKILL) }
        // Deleting either end of a veth pair deletes both; the namespace goes when its last
        // process has (the kills above).
        _ = try? command(ip, ["link", "del", rootLink])
        _ = try? command(ip, ["netns", "del", namespace])
    }

    /// Removes the namespaces and root-side veths named `hc-PID-x` / `hcPIDx` of a pid that is
    /// this process's or no longer runs: what an earlier run that crashed left.
    static func removeStale() {
        guard let ip else { return }
        let own = getpid()
        func stale(_ pid: pid_t) -> Bool { pid == own || (kill(pid, 0) != 0 && errno == ESRCH) }
        let namespaces = ((try? command(ip, ["netns", "list"])) ?? "").split(separator: "\n").compactMap { $0.split(separator: " ").first }
        for ns in namespaces where ns.hasPrefix("hc-") {
            let parts = ns.split(separator: "-")
            guard parts.count == 3, let pid = pid_t(parts[1]), parts[2].count == 1, stale(pid) else { continue }
            remove(namespace: String(ns), rootLink: "hc\(pid)\(parts[2])")
        }
        // Root-side ends whose namespace is gone but which stayed (`hc` digits, one letter).
        let links = ((try? command(ip, ["-o", "link", "show", "type", "veth"])) ?? "").split(separator: "\n")
        for line in links {
            let fields = line.split(separator: " ")
            guard fields.count > 1 else { continue }
            let name = fields[1].split(separator: "@").first.map { $0.trimmingCharacters(in: CharacterSet(charactersIn: ":")) } ?? ""
            guard name.hasPrefix("hc"), let letter = name.last, letter.isLowercase, let pid = pid_t(name.dropFirst(2).dropLast()), stale(pid)
            else { continue }
            _ = try? command(ip, ["link", "del", name])
        }
    }
}
