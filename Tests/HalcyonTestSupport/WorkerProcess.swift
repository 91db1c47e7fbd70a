import Foundation

/// A `halcyon` subprocess (a worker, migrate, …) with its output captured to a file.
public final class HalcyonProcess: @unchecked Sendable {
    public let process = Process()
    public let logURL: URL

    /// Starts `halcyon ARGS` against `conninfo`.
    public init(_ arguments: [String], conninfo: String, environment: [String: String] = [:]) throws {
        logURL = try TestEnvironment.temporaryDirectory("proc").appendingPathComponent("output.log")
        _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
        let log = try FileHandle(forWritingTo: logURL)
        process.executableURL = URL(fileURLWithPath: TestEnvironment.binary)
        process.arguments = arguments + ["--database-url", conninfo]
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        process.environment = env
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }

    public func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    /// Waits up to `timeout` seconds; on timeout kills the process and returns nil.
    public func wait(timeout: Double) async -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                return nil
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return process.terminationStatus
    }

    public var output: String {
        (try? String(contentsOf: logURL, encoding: .utf8)) ?? ""
    }
}
