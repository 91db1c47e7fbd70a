import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import HalcyonWorker
import Logging

struct Wait: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wait",
        abstract: "Wait until jobs are finished; exit 0 if all succeeded, 1 if any failed or was cancelled, 2 on timeout.",
        discussion: """
            Listens on halcyon_job_finished and reads the jobs' states once listening, then again \
            only when a notification names one of them: no polling (with --poll-only, or \
            HALCYON_POLL_ONLY=1, it polls instead: LISTEN does not work behind PgBouncer's \
            transaction pooling). Prints one line per job (id, state, and the result path or the \
            failure's code), or JSON with --json.

            A job id with no row counts as a failure (exit 1).
            """)

    @OptionGroup var database: DatabaseOptions
    @Argument(help: "Job ids.")
    var ids: [Int64]
    @OptionGroup var waiting: WaitOptions

    func validate() throws {
        guard !ids.isEmpty else { throw ValidationError("give at least one job id") }
        guard ids.count <= WaitOptions.maxJobs else { throw ValidationError("wait for at most \(WaitOptions.maxJobs) jobs at once") }
    }

    func run() async throws {
        let (connection, conninfo) = try await database.connect()
        await connection.close()
        throw ExitCode(try await waiting.wait(for: ids, conninfo: conninfo, database: database.described))
    }
}

/// How `wait` and `enqueue --wait` wait and report.
struct WaitOptions: ParsableArguments {
    static let maxJobs = 100_000

    @Option(help: ArgumentHelp(Options.timeout.help))
    var timeout = TimeSpanArgument(Options.timeout.defaultValue)
    @Flag(help: "Print the outcome as JSON.")
    var json = false
    @Flag(
        help:
            "Never LISTEN; read the jobs' states every --poll-interval instead (behind PgBouncer's transaction pooling; also HALCYON_POLL_ONLY=1)."
    )
    var pollOnly = false
    @Option(help: ArgumentHelp(Options.pollInterval.help))
    var pollInterval = TimeSpanArgument(Options.pollInterval.defaultValue)

    private enum Options {
        static let timeout = Setting.duration("--timeout", default: .seconds(30), .zero...(.days(30)), "Most time to wait", detail: "0s: check once.")
        /// A worker's poll interval, default and range.
        static let pollInterval = Setting.duration(
            "--poll-interval", default: WorkerConfiguration.Settings.pollInterval.defaultValue, WorkerConfiguration.Settings.pollInterval.range,
            "With --poll-only: how often the states are read")
    }

    func validate() throws {
        try timeout.check(Options.timeout)
        try pollInterval.check(Options.pollInterval)
    }

    /// Waits, prints the outcome and returns the exit code: 0 all succeeded, 1 some failed, was
    /// cancelled or does not exist, 2 some were still unfinished at the timeout. `database` names
    /// where the jobs were looked for, in the message about ids that have no row.
    func wait(for ids: [Int64], conninfo: String, database: String) async throws -> Int32 {
        var logger = Logger(label: "halcyon.wait")
        logger.logLevel = .warning
        var waiter = JobWaiter(conninfo: conninfo, logger: logger)
        if pollOnly || PollOnlyEnvironment.isSet { waiter.pollInterval = pollInterval.duration }
        let outcome = try await waiter.wait(for: ids, timeout: timeout.duration)
        print(json ? Self.json(ids, outcome).prettyText : Self.text(ids, outcome), terminator: json ? "\n" : "")
        let missing = ids.filter { outcome.missing.contains($0) }
        if !missing.isEmpty {
            fflush(nil)
            printError("no job \(missing.map(String.init).joined(separator: ", ")) in \(database)")
        }
        if outcome.timedOut { return 2 }
        return outcome.allSucceeded ? 0 : 1
    }

    static func text(_ ids: [Int64], _ outcome: JobWaiter.Outcome) -> String {
        var out = ""
        for id in ids {
            if let s = outcome.finished[id] {
                var line = "\(id) \(s.state.rawValue)"
                if s.state == .succeeded, let path = s.resultPath { line += " \(path)\(s.cacheHit == true ? " (store hit)" : "")" }
                if s.state == .failed, let code = s.code { line += " \(code)" }
                out += line + "\n"
            } else if outcome.missing.contains(id) {
                out += "\(id) no such job\n"
            } else {
                out += "\(id) unfinished (timed out)\n"
            }
        }
        return out
    }

    static func json(_ ids: [Int64], _ outcome: JobWaiter.Outcome) -> JSONValue {
        let jobs: [JSONValue] = ids.map { id in
            var o: [String: JSONValue] = ["id": .number(Double(id))]
            if let s = outcome.finished[id] {
                o["state"] = .string(s.state.rawValue)
                o["code"] = s.code.map { .string($0) } ?? .null
                o["cache_hit"] = s.cacheHit.map { .bool($0) } ?? .null
                o["result_path"] = s.resultPath.map { .string($0) } ?? .null
            } else {
                o["state"] = outcome.missing.contains(id) ? .null : .string("unfinished")
                if outcome.missing.contains(id) { o["error"] = .string("no such job") }
            }
            return .object(o)
        }
        return .object(["jobs": .array(jobs), "timed_out": .bool(outcome.timedOut), "all_succeeded": .bool(outcome.allSucceeded)])
    }
}
