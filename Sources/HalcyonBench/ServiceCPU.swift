import Foundation
import HalcyonRuntime

/// The CPU of a service the hosts share — PostgreSQL, the S3 server — found by where it listens
/// (a TCP port or a Unix socket in this namespace): the listening process and the processes it
/// started (PostgreSQL's backends), so X can say whether the shared pieces kept up.
struct ServiceCPU: Sendable {
    let pid: pid_t

    /// The process listening on `target`: `unix:/path` or `HOST:PORT` (any local address).
    static func listening(on target: String) -> ServiceCPU? {
        let inodes: Set<String>
        if target.hasPrefix("unix:") {
            let path = String(target.dropFirst(5))
            inodes = Set(
                lines("/proc/net/unix").compactMap { f in
                    // Num RefCount Protocol Flags Type St Inode Path. A server's accepted
                    // connections carry the path too: only the listening socket (flag
                    // __SO_ACCEPTCON, 0x10000) is the server's.
                    f.count >= 8 && f[7] == path && (Int(f[3], radix: 16) ?? 0) & 0x10000 != 0 ? f[6] : nil
                })
        } else {
            guard let port = target.split(separator: ":").last.flatMap({ Int($0) }) else { return nil }
            let hexPort = String(format: ":%04X", port)
            inodes = Set(
                (lines("/proc/net/tcp") + lines("/proc/net/tcp6")).compactMap { f in
                    // sl local_address rem_address st … inode: st 0A is LISTEN.
                    f.count >= 10 && f[1].hasSuffix(hexPort) && f[3] == "0A" ? f[9] : nil
                })
        }
        guard !inodes.isEmpty else { return nil }
        let pids = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { pid_t($0) }.sorted()
        for pid in pids {
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
            for fd in fds {
                guard let link = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"),
                    link.hasPrefix("socket:["), inodes.contains(String(link.dropFirst(8).dropLast()))
                else { continue }
                return ServiceCPU(pid: pid)
            }
        }
        return nil
    }

    /// CPU seconds so far: the process's own and its reaped children's, and its live
    /// descendants' (a backend that ends between two readings is counted in its parent's).
    var seconds: Double {
        var total = Self.stat(pid, children: true) ?? 0
        var queue = [pid]
        while let p = queue.popLast() {
            let children = ProcessMemory.children(of: p)
            for c in children { total += Self.stat(c, children: false) ?? 0 }
            queue += children
        }
        return total
    }

    /// utime + stime (and with `children`, cutime + cstime) of `/proc/PID/stat`, in seconds.
    static func stat(_ pid: pid_t, children: Bool) -> Double? {
        guard let text = KernelFile.text("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
        // After "pid (comm)": state is field 3; utime, stime, cutime, cstime are fields 14–17.
        let f = text[text.index(after: close)...].split(separator: " ")
        guard f.count > 14 else { return nil }
        let ticks = (children ? f[11...14] : f[11...12]).compactMap { Double($0) }.reduce(0, +)
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    private static func lines(_ path: String) -> [[String]] {
        (KernelFile.text(path) ?? "").split(separator: "\n").dropFirst().map {
            $0.split(separator: " ").map(String.init)
        }
    }
}

/// PostgreSQL's CPU over one of the bench's runs (W1, W2, W3): its server's processes, found
/// where the bench's connection string says it listens — the backends serving the worker
/// included, and those that exit during the run through their parent's reaped-children time.
/// Nothing when the server is not on this machine or its processes cannot be read.
struct DatabaseCPU {
    private let service: ServiceCPU?
    private let before: Double

    init(conninfo: String) {
        service = Bench.postgresTarget(conninfo).flatMap { ServiceCPU.listening(on: $0.target) }
        before = service?.seconds ?? 0
    }

    /// CPU seconds since `init`, or nil when the server was not found. A backend whose client
    /// has just gone is counted once its server has reaped it: give it a moment.
    func spent() async -> Double? {
        guard let service else { return nil }
        try? await Task.sleep(for: .milliseconds(300))
        return max(0, service.seconds - before)
    }
}
