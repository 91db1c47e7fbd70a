import Foundation
import HalcyonEmbedded
import HalcyonRuntime

/// TCP forwarders in the root namespace (`tcp_forward.py` beside this file, embedded in the
/// binary and run with python3 from a copy in `directory`): every listen address gets a port per
/// target, which carries each connection to the target (`unix:/path` or `HOST:PORT`) both ways.
///
/// Python's asyncio rather than a forwarder in Swift: it is the one the cross-host test has
/// always run (thousands of connections, a host killed mid-transfer), it is bounded (512
/// connections) and small, and python3 is already what the bench's peers and `scripts/test` need.
public final class TCPForwarder: Sendable {
    public let pid: pid_t
    /// Address → target name → port.
    public let ports: [String: [String: Int]]
    public let logURL: URL

    private init(pid: pid_t, ports: [String: [String: Int]], logURL: URL) {
        self.pid = pid
        self.ports = ports
        self.logURL = logURL
    }

    /// The script's text, as built into the binary.
    public static var script: String { String(decoding: PackageResources.tcp_forward_py, as: UTF8.self) }

    /// Nil when python3 is on PATH; otherwise why forwarders cannot start here.
    public static var unavailableReason: String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let found = path.split(separator: ":").contains { FileManager.default.isExecutableFile(atPath: "\($0)/python3") }
        return found ? nil : "needs python3 on PATH (the TCP forwarders)"
    }

    /// Starts the forwarders, with the script, its port file and its log in `directory` (made
    /// if missing); returns once every listener is up.
    public static func start(listen addresses: [String], targets: [String: String], directory: URL) async throws -> TCPForwarder {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let portFile = directory.appendingPathComponent("ports.json")
        try? FileManager.default.removeItem(at: portFile)
        let scriptURL = directory.appendingPathComponent("tcp_forward.py")
        try Data(PackageResources.tcp_forward_py).write(to: scriptURL)
        let logURL = directory.appendingPathComponent("forwarder.log")
        // env execs python3 (found on PATH) in place: the pid is python's.
        let pid = try Subprocess.spawn(
            "/usr/bin/env",
            ["python3", scriptURL.path, portFile.path] + addresses.flatMap { ["--listen", $0] }
                + targets.flatMap { ["--target", "\($0.key)=\($0.value)"] },
            outputPath: logURL.path)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let text = try? String(contentsOf: portFile, encoding: .utf8), case .object(let byAddress)? = JSONValue.parse(text) {
                var ports: [String: [String: Int]] = [:]
                for (address, value) in byAddress {
                    guard case .object(let byName) = value else { continue }
                    ports[address] = byName.compactMapValues { $0.numberValue.map { Int($0) } }
                }
                return TCPForwarder(pid: pid, ports: ports, logURL: logURL)
            }
            if Subprocess.status(of: pid, block: false) != nil { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        kill(pid, SIGKILL)
        _ = Subprocess.status(of: pid, block: true)
        throw NetworkHosts.failure("tcp_forward.py did not start: \((try? String(contentsOf: logURL, encoding: .utf8)) ?? "")")
    }

    /// The port `address` forwards to `target` on.
    public func port(_ address: String, _ target: String) -> Int { ports[address]?[target] ?? 0 }

    /// The CPU seconds (user + system) the forwarders have used so far (`/proc/PID/stat`); nil
    /// when unreadable.
    public var cpuSeconds: Double? {
        guard let text = KernelFile.text("/proc/\(pid)/stat"),
            let close = text.lastIndex(of: ")")
        else { return nil }
        // After "pid (comm)": state is field 3; utime and stime are fields 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Stops the forwarders (closing every connection) and reaps the process.
    public func stop() {
        kill(pid, SIGKILL)
        _ = Subprocess.status(of: pid, block: true)
    }
}
