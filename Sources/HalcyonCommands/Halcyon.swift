import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonRuntime
import HalcyonWorker
import Logging
import Synchronization

/// The `halcyon` command line: every command users run. `Sources/halcyon/main.swift` runs it,
/// and so does the suite's fault-injecting build (`Tests/halcyon-faults`), which passes the hook
/// `main(chainStarted:)` takes.
public struct Halcyon: AsyncParsableCommand {
    public init() {}

    public static let configuration = CommandConfiguration(
        commandName: "halcyon",
        abstract: "A batch image pipeline worker fed by a PostgreSQL job queue.",
        discussion: """
            Applications enqueue image jobs into halcyon.jobs (plain SQL or `halcyon enqueue`); \
            `halcyon work` processes claim them, download the source, run the processor chain \
            through ImageMagick and write the result into a content-addressed store.

            Database: --database-url, else DATABASE_URL, else the standard PG* variables, else an \
            embedded PostgreSQL cluster under $HALCYON_HOME (default ./.halcyon), started on demand.
            """,
        version: HalcyonVersion.string,
        subcommands: [
            Migrate.self, Enqueue.self, Wait.self, Work.self, Status.self, Show.self, Similar.self,
            Retry.self, Cancel.self, Pause.self, Resume.self, Limit.self, Prune.self, Deliver.self, Sweep.self, Verify.self, Validate.self,
            Presets.self,
            Dashboard.self, UsageCommand.self, DemoTool.self, BenchTool.self,
            Embedded.self,
        ]
    )

    /// Runs the command line this process was given.
    public static func main() async { await main(chainStarted: nil) }

    /// `main()`, with `chainStarted` called by `halcyon work` as each chain's image work starts,
    /// with the job's sources (`JobRunner.chainStarted`): nil in the `halcyon` binary.
    public static func main(chainStarted: ChainStartedHook?) async {
        // A plain value set once before parsing, not a task-local: `withValue` around the whole
        // command line crashed the release build of every command (Swift 6.3, optimised).
        Work.chainStarted.withLock { $0 = chainStarted }
        await parseAndRun()
    }

    /// `halcyon bench` and `halcyon demo` are programs of their own (`Tools`): handed over before
    /// any parsing, so that their options and `--help` are theirs.
    private static func parseAndRun() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if let name = arguments.first, Tools.names.contains(name) { Tools.exec(name, Array(arguments.dropFirst())) }
        // ArgumentParser's `main`, but an error is printed without the secrets this process was
        // given (a library's message may quote a connection string or a key).
        do {
            var command = try await asyncParseAsRoot(arguments)
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            guard code != .success else { exit(withError: error) }  // --help: printed as ArgumentParser prints it
            LogSecrets.registerProcess()
            let text = fullMessage(for: error)
            if !text.isEmpty { printError(LogSecrets.scrub(text)) }
            Foundation.exit(code.rawValue)
        }
    }
}
