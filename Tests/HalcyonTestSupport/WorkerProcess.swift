import Foundation
import HalcyonEmbedded
import HalcyonRuntime
import Synchronization
import Testing

/// A `halcyon` subprocess (a worker, migrate, …) with its output captured to a file.
///
/// It runs in a process group of its own (with the image process a worker starts), and it
/// ends with the test that started it, whatever the test's outcome: when the object goes away,
/// and at the end of a `.processes` test for any it still holds, the whole group is killed.
/// A process may only be started by a test that carries `.processes` (`ProcessTurns`).
public final class HalcyonProcess: Sendable {
    public let pid: pid_t
    public let logURL: URL
    private let exitStatus = Mutex<Int32?>(nil)
    /// The test that started it (`ProcessTurns` sets it).
    private let startedIn: String?

    /// The test case run whose scope this is (a token `ProcessTurns` makes for each).
    @TaskLocal public static var owner: String?
    /// Processes started and not yet reaped, by test.
    private static let live = Mutex<[pid_t: (test: String, process: WeakProcess)]>([:])

    /// Starts `halcyon ARGS --database-url CONNINFO` (without the option when `conninfo` is nil);
    /// `executable` runs something else with those arguments (a shell wrapping halcyon).
    ///
    /// `newProcessGroup` false: the executable makes the group itself (`setsid`, which would
    /// fork if it were started as a group leader already).
    public init(
        _ arguments: [String], conninfo: String?, environment: [String: String] = [:],
        executable: String = TestEnvironment.binary, newProcessGroup: Bool = true
    ) throws {
        logURL = try TestEnvironment.temporaryDirectory("proc").appendingPathComponent("output.log")
        if ProcessTurns.held == 0 {
            Issue.record("a test that starts processes must carry the .processes trait (ProcessTurns): \(arguments.prefix(1))")
        }
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        pid = try Subprocess.spawn(
            executable, arguments + (conninfo.map { ["--database-url", $0] } ?? []),
            outputPath: logURL.path, environment: env, newProcessGroup: newProcessGroup)
        startedIn = Self.owner
        let entry = (test: startedIn ?? "", process: WeakProcess(self))
        Self.live.withLock { $0[pid] = entry }
    }

    deinit {
        if exitStatus.withLock({ $0 }) == nil { endGroup() }
    }

    /// Kills the process's group (it and what it started) and reaps the process.
    private func endGroup() {
        kill(-pid, SIGKILL)
        kill(pid, SIGKILL)
        exitStatus.withLock { s in
            if s == nil { s = reap(block: true) }
        }
        _ = Self.live.withLock { $0.removeValue(forKey: pid) }
    }

    /// Reaps the process when it has ended; its CPU (and its reaped descendants') is counted
    /// to the test that started it.
    private func reap(block: Bool) -> Int32? {
        guard let (status, cpu) = Subprocess.reap(pid, block: block) else { return nil }
        if let startedIn { Self.cpu.withLock { $0[startedIn, default: 0] += cpu } }
        return status
    }

    /// CPU seconds of the processes each test (scope) started, as they were reaped.
    private static let cpu = Mutex<[String: Double]>([:])

    /// The CPU seconds of the processes started in the scope `key` and reaped so far, now taken.
    static func takeCPU(of key: String) -> Double {
        cpu.withLock { $0.removeValue(forKey: key) ?? 0 }
    }

    /// Ends every process started in the scope `key` (one test case's run, `owner`) that still
    /// runs: its objects may outlive the test, captured somewhere. Called by `ProcessTurns`.
    static func endAll(startedIn key: String) {
        let left = live.withLock { live in live.values.filter { $0.test == key }.compactMap(\.process.process) }
        for process in left where process.isRunning { process.endGroup() }
    }

    public var isRunning: Bool { poll() == nil }

    /// Sends `sig` to the process. SIGKILL takes its whole group with it — a whole worker dying
    /// at once, as with its host (`halcyon work` does its image work in a supervised child, which
    /// would otherwise stop gracefully on its own).
    public func signal(_ sig: Int32) {
        guard isRunning else { return }
        if sig == SIGKILL { kill(-pid, SIGKILL) }
        kill(pid, sig)
    }

    /// The process's children (a supervised worker's image process).
    public var children: [pid_t] { ProcessMemory.children(of: pid) }

    /// The largest peak resident set (`VmHWM`, KiB) of the process and its children now — a
    /// supervised worker's image work is in its child. Poll it while the process runs.
    public var peakRSSKiB: Int {
        ([pid] + children).compactMap { ProcessMemory.peakRSS(of: $0) }.max().map { $0 / 1024 } ?? 0
    }

    private func poll() -> Int32? {
        let status = exitStatus.withLock { s in
            if s == nil { s = reap(block: false) }
            return s
        }
        if status != nil { _ = Self.live.withLock { $0.removeValue(forKey: pid) } }
        return status
    }

    /// Waits up to `timeout` seconds for the exit status; on timeout kills the process and
    /// returns nil.
    public func wait(timeout: Double) async -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let s = poll() { return s }
            if Date() > deadline {
                endGroup()
                return nil
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    public var output: String {
        (try? String(contentsOf: logURL, encoding: .utf8)) ?? ""
    }

    /// Waits until the output contains `text` (true), or the process has exited or `timeout`
    /// seconds passed (false).
    public func waitForOutput(_ text: String, timeout: Double = 120) async throws -> Bool {
        try await waitUntil(timeout) { output.contains(text) || !isRunning } && output.contains(text)
    }

    /// Waits until a worker is ready — its image process is past start-up, its signal handlers
    /// are in place and it is registered (the "worker started" line, logged at info) — and
    /// records an issue with its output when it is not within `timeout` seconds, a generous
    /// bound: a test's own deadlines count from here.
    @discardableResult
    public func ready(timeout: Double = 120, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Bool {
        let ready = try await waitForOutput("worker started", timeout: timeout)
        if !ready {
            Issue.record("the worker was not ready within \(Int(timeout)) s: \(output.suffix(2000))", sourceLocation: sourceLocation)
        }
        return ready
    }
}

/// A reference that does not keep its process object alive.
private final class WeakProcess: @unchecked Sendable {
    weak var process: HalcyonProcess?
    init(_ process: HalcyonProcess) { self.process = process }
}

/// Polls `progress` every 100 ms until `done` holds for its value (true). Fails (false) only
/// when the value has not changed for `stall` seconds, or after `limit` seconds in all: a
/// slow machine makes progress slowly, a broken one stops making it.
public func waitForProgress<Value: Equatable>(
    stall: Double = 60, limit: Double = 600, _ progress: () async throws -> Value, until done: (Value) -> Bool
) async throws -> Bool {
    let start = Date()
    var last = try await progress()
    var changed = Date()
    while !done(last) {
        if Date().timeIntervalSince(changed) > stall || Date().timeIntervalSince(start) > limit { return false }
        try await Task.sleep(for: .milliseconds(100))
        let now = try await progress()
        if now != last {
            last = now
            changed = Date()
        }
    }
    return true
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
