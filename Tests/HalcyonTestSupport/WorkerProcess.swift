import Foundation
import HalcyonEmbedded
import HalcyonRuntime
import Synchronization

/// A `halcyon` subprocess (a worker, migrate, …) with its output captured to a file.
public final class HalcyonProcess: Sendable {
    public let pid: pid_t
    public let logURL: URL
    private let exitStatus = Mutex<Int32?>(nil)

    /// Starts `halcyon ARGS --database-url CONNINFO` (without the option when `conninfo` is nil);
    /// `executable` runs something else with those arguments (a shell wrapping halcyon).
    public init(
        _ arguments: [String], conninfo: String?, environment: [String: String] = [:],
        executable: String = TestEnvironment.binary
    ) throws {
        logURL = try TestEnvironment.temporaryDirectory("proc").appendingPathComponent("output.log")
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        pid = try Subprocess.spawn(
            executable, arguments + (conninfo.map { ["--database-url", $0] } ?? []),
            outputPath: logURL.path, environment: env)
    }

    public var isRunning: Bool { poll() == nil }

    /// Sends `sig` to the process. SIGKILL takes its children with it — a whole worker dying at
    /// once, as with its host (`halcyon work` does its image work in a supervised child, which
    /// would otherwise stop gracefully on its own).
    public func signal(_ sig: Int32) {
        guard isRunning else { return }
        let children = sig == SIGKILL ? ProcessMemory.children(of: pid) : []
        kill(pid, sig)
        for child in children { kill(child, SIGKILL) }
    }

    /// The process's children (a supervised worker's image process).
    public var children: [pid_t] { ProcessMemory.children(of: pid) }

    /// The largest peak resident set (`VmHWM`, KiB) of the process and its children now — a
    /// supervised worker's image work is in its child. Poll it while the process runs.
    public var peakRSSKiB: Int {
        ([pid] + children).compactMap { ProcessMemory.peakRSS(of: $0) }.max().map { $0 / 1024 } ?? 0
    }

    private func poll() -> Int32? {
        exitStatus.withLock { s in
            if s == nil { s = Subprocess.status(of: pid, block: false) }
            return s
        }
    }

    /// Waits up to `timeout` seconds for the exit status; on timeout kills the process and
    /// returns nil.
    public func wait(timeout: Double) async -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let s = poll() { return s }
            if Date() > deadline {
                let children = ProcessMemory.children(of: pid)
                kill(pid, SIGKILL)
                for child in children { kill(child, SIGKILL) }
                exitStatus.withLock { s in s = Subprocess.status(of: pid, block: true) }
                return nil
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    public var output: String {
        (try? String(contentsOf: logURL, encoding: .utf8)) ?? ""
    }
}

/// Polls `condition` every 100 ms until it holds (true) or `timeout` seconds pass (false).
public func waitUntil(_ timeout: Double, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(100))
    }
    return false
}
