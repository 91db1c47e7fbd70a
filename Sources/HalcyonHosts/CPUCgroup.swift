import Foundation
import HalcyonRuntime

/// A CPU cgroup that caps its processes (and every process they start) at `cores` cores, for a
/// simulated host: the bench's X puts each host's worker in one, so that the hosts, not this
/// machine's cores, are what limits a run.
///
/// cgroup v1 where a hierarchy with the `cpu` controller is mounted and writable
/// (`cpu.cfs_quota_us` over `cpu.cfs_period_us` = 100 ms), else cgroup v2 where the unified
/// hierarchy offers the `cpu` controller (`cpu.max`). With v1, when `cpuacct` is mounted apart
/// from `cpu`, a group of the same name is made there too, for the CPU its processes used.
/// Groups are made at the hierarchy's root, named by the caller (`hc-PID-x`, as `NetworkHosts`
/// names its namespaces), so that `removeStale()` finds what a crashed run left. Needs root.
public final class CPUCgroup: Sendable {
    public enum Version: String, Sendable { case v1, v2 }

    public let name: String
    public let cores: Double
    public let version: Version
    /// The group that carries the cap.
    public let directory: String
    /// v1 with `cpuacct` mounted apart: the group of the same name there (usage only).
    public let accountingDirectory: String?

    /// The scheduler period the quota is a share of, in microseconds.
    public static let period = 100_000

    /// The quota for `cores` cores, in microseconds per period (at least 1 ms, the kernel's minimum).
    public static func quota(cores: Double) -> Int { max(1000, Int((cores * Double(period)).rounded())) }

    private init(name: String, cores: Double, version: Version, directory: String, accountingDirectory: String?) {
        self.name = name
        self.cores = cores
        self.version = version
        self.directory = directory
        self.accountingDirectory = accountingDirectory
    }

    // MARK: - Where the hierarchies are

    /// A mounted cgroup hierarchy (`/proc/self/mounts`).
    struct Mount {
        var path: String
        var v2: Bool
        var options: Set<String>
    }

    static func mounts(_ text: String?) -> [Mount] {
        (text ?? "").split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ")
            guard f.count >= 4, f[2] == "cgroup" || f[2] == "cgroup2" else { return nil }
            // Mount points escape spaces as \040.
            let path = f[1].replacingOccurrences(of: "\\040", with: " ")
            return Mount(path: path, v2: f[2] == "cgroup2", options: Set(f[3].split(separator: ",").map(String.init)))
        }
    }

    /// The v1 hierarchy with the `cpu` controller, and the one with `cpuacct` (the same one when
    /// they are mounted together).
    static func v1Roots(_ mounts: [Mount]) -> (cpu: String?, cpuacct: String?) {
        let all = mounts.filter { !$0.v2 }
        return (all.first { $0.options.contains("cpu") }?.path, all.first { $0.options.contains("cpuacct") }?.path)
    }

    /// The unified (v2) hierarchy, if one is mounted.
    static func v2Root(_ mounts: [Mount]) -> String? { mounts.first(where: \.v2)?.path }

    /// This machine's mount table.
    static var mountTable: String? { KernelFile.text("/proc/self/mounts") }

    // MARK: - Making and removing

    /// Makes the group `name` capped at `cores` cores: v1 first, then v2. Throws with every path
    /// tried and why it failed when neither can be written.
    public static func create(name: String, cores: Double) throws -> CPUCgroup {
        try create(name: name, cores: cores, mountTable: mountTable)
    }

    /// `create` on the hierarchies `mountTable` (`/proc/self/mounts`' format) names.
    static func create(name: String, cores: Double, mountTable: String?) throws -> CPUCgroup {
        guard cores > 0, !name.isEmpty, !name.contains("/"), name != "." && name != ".." else {
            throw failure("a CPU cgroup needs a name (no '/') and cores above 0")
        }
        let mounts = mounts(mountTable)
        var tried: [String] = []
        let (cpuRoot, acctRoot) = v1Roots(mounts)
        if let cpuRoot {
            let dir = "\(cpuRoot)/\(name)"
            do {
                try makeDirectory(dir)
                do {
                    try write("\(period)", to: "\(dir)/cpu.cfs_period_us")
                    try write("\(quota(cores: cores))", to: "\(dir)/cpu.cfs_quota_us")
                } catch {
                    removeDirectory(dir)
                    throw error
                }
                var accounting: String?
                if let acctRoot, acctRoot != cpuRoot, (try? makeDirectory("\(acctRoot)/\(name)")) != nil {
                    accounting = "\(acctRoot)/\(name)"
                }
                return CPUCgroup(name: name, cores: cores, version: .v1, directory: dir, accountingDirectory: accounting)
            } catch {
                tried.append("cgroup v1 \(cpuRoot): \(error.localizedDescription)")
            }
        } else {
            tried.append("cgroup v1: no hierarchy with the cpu controller is mounted")
        }
        if let root = v2Root(mounts) {
            let dir = "\(root)/\(name)"
            do {
                let controllers = (KernelFile.text("\(root)/cgroup.controllers") ?? "")
                    .trimmingCharacters(in: .whitespacesAndNewlines)
                guard controllers.split(separator: " ").contains("cpu") else {
                    throw failure("the cpu controller is not available there (cgroup.controllers: '\(controllers)')")
                }
                let enabled = KernelFile.text("\(root)/cgroup.subtree_control") ?? ""
                if !enabled.split(whereSeparator: \.isWhitespace).contains("cpu") {
                    try write("+cpu", to: "\(root)/cgroup.subtree_control")
                }
                try makeDirectory(dir)
                do {
                    try write("\(quota(cores: cores)) \(period)", to: "\(dir)/cpu.max")
                } catch {
                    removeDirectory(dir)
                    throw error
                }
                return CPUCgroup(name: name, cores: cores, version: .v2, directory: dir, accountingDirectory: nil)
            } catch {
                tried.append("cgroup v2 \(root): \(error.localizedDescription)")
            }
        } else {
            tried.append("cgroup v2: no unified hierarchy is mounted")
        }
        throw failure("cannot make a CPU cgroup: " + tried.joined(separator: "; "))
    }

    /// Nil when a CPU cgroup can be made here (a probe group is made and removed); otherwise why
    /// not, with every path tried.
    public static let unavailableReason: String? = {
        guard getuid() == 0 else { return "needs root (CPU cgroups)" }
        do {
            try create(name: "hc-\(getpid())-probe", cores: 0.5).remove()
            return nil
        } catch {
            return error.localizedDescription
        }
    }()

    /// Puts `pid` in the group, then any process it started before it was moved (a child
    /// inherits its parent's group at fork, so one forked after the move is in already): passes
    /// over its descendants until one finds them all inside, which closes the window between a
    /// spawn and this call.
    public func add(_ pid: pid_t) throws {
        try move(pid)
        for _ in 0..<20 {
            let inside = Set(pids())
            let outside = Self.descendants(of: pid).filter { !inside.contains($0) }
            if outside.isEmpty { return }
            for p in outside { try? move(p) }
        }
    }

    private func move(_ pid: pid_t) throws {
        try Self.write("\(pid)", to: "\(directory)/cgroup.procs")
        if let accountingDirectory { try? Self.write("\(pid)", to: "\(accountingDirectory)/cgroup.procs") }
    }

    /// The processes in the group.
    public func pids() -> [pid_t] {
        (KernelFile.text("\(directory)/cgroup.procs") ?? "").split(separator: "\n").compactMap { pid_t($0) }
    }

    /// The quota as the kernel holds it, in cores (nil when unreadable).
    public var quotaCores: Double? {
        switch version {
        case .v1:
            guard let q = Self.number("\(directory)/cpu.cfs_quota_us"), let p = Self.number("\(directory)/cpu.cfs_period_us"), q > 0, p > 0
            else { return nil }
            return q / p
        case .v2:
            let f = (KernelFile.text("\(directory)/cpu.max") ?? "").split(whereSeparator: \.isWhitespace)
            guard f.count == 2, let q = Double(f[0]), let p = Double(f[1]), p > 0 else { return nil }
            return q / p
        }
    }

    /// CPU seconds the group's processes have used since it was made (v1 `cpuacct.usage`, v2
    /// `cpu.stat`'s `usage_usec`); nil where nothing accounts for it.
    public var usageSeconds: Double? {
        switch version {
        case .v1:
            for dir in [directory, accountingDirectory].compactMap({ $0 }) {
                if let ns = Self.number("\(dir)/cpuacct.usage") { return ns / 1e9 }
            }
            return nil
        case .v2:
            return stat()["usage_usec"].map { $0 / 1e6 }
        }
    }

    /// How often the cap held the group back: scheduler periods with processes runnable, those
    /// in which the quota ran out, and the time spent held back.
    public struct Throttling: Sendable {
        public var periods: Int
        public var throttled: Int
        public var throttledSeconds: Double
    }

    public var throttling: Throttling? {
        let s = stat()
        guard let periods = s["nr_periods"], let throttled = s["nr_throttled"] else { return nil }
        let seconds = s["throttled_time"].map { $0 / 1e9 } ?? s["throttled_usec"].map { $0 / 1e6 } ?? 0
        return Throttling(periods: Int(periods), throttled: Int(throttled), throttledSeconds: seconds)
    }

    private func stat() -> [String: Double] {
        var out: [String: Double] = [:]
        for line in (KernelFile.text("\(directory)/cpu.stat") ?? "").split(separator: "\n") {
            let f = line.split(separator: " ")
            if f.count == 2, let v = Double(f[1]) { out[String(f[0])] = v }
        }
        return out
    }

    /// Removes the group (and its accounting twin). Processes still in it are killed first —
    /// they are the host's, started for it. Safe to call more than once.
    public func remove() {
        for dir in [directory, accountingDirectory].compactMap({ $0 }) { Self.remove(group: dir) }
    }

    /// Removes the groups named `hc-PID-…` of a pid that is this process's or no longer runs:
    /// what an earlier run that crashed left.
    public static func removeStale() {
        let own = getpid()
        func stale(_ pid: pid_t) -> Bool { pid == own || (kill(pid, 0) != 0 && errno == ESRCH) }
        let mounts = mounts(mountTable)
        let (cpu, acct) = v1Roots(mounts)
        for root in Set([cpu, acct, v2Root(mounts)].compactMap { $0 }) {
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] where entry.hasPrefix("hc-") {
                let parts = entry.split(separator: "-")
                guard parts.count == 3, let pid = pid_t(parts[1]), stale(pid) else { continue }
                remove(group: "\(root)/\(entry)")
            }
        }
    }

    static func remove(group dir: String) {
        for attempt in 0..<100 {
            if rmdir(dir) == 0 || errno == ENOENT { return }
            guard errno == EBUSY else { return }
            // Still populated: a process not yet reaped, or one left behind.
            if attempt >= 5 {
                for line in (KernelFile.text("\(dir)/cgroup.procs") ?? "").split(separator: "\n") {
                    if let pid = pid_t(line) { kill(pid, SIGKILL) }
                }
            }
            usleep(20_000)
        }
    }

    // MARK: - Files

    /// `pid`'s descendants, children first (`/proc/PID/task/*/children`, recursively).
    static func descendants(of pid: pid_t) -> [pid_t] {
        var out: [pid_t] = [], queue = [pid]
        while let p = queue.popLast() {
            let children = ProcessMemory.children(of: p)
            out += children
            queue += children
        }
        return out
    }

    static func number(_ path: String) -> Double? {
        KernelFile.text(path).flatMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    static func makeDirectory(_ path: String) throws {
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else { throw failure("mkdir \(path): \(String(cString: strerror(errno)))") }
    }

    static func removeDirectory(_ path: String) { _ = rmdir(path) }

    /// Writes `text` to a control file in one `write`, as the kernel expects; the error names the
    /// file and the reason.
    static func write(_ text: String, to path: String) throws {
        let fd = open(path, O_WRONLY)
        guard fd >= 0 else { throw failure("open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard n == bytes.count else { throw failure("write '\(text)' to \(path): \(String(cString: strerror(errno)))") }
    }

    static func failure(_ message: String) -> Error {
        CocoaError(.featureUnsupported, userInfo: [NSLocalizedDescriptionKey: message])
    }
}
