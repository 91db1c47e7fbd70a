import ArgumentParser
import Foundation
import HalcyonCore
import Logging

@main
struct Halcyon: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "halcyon",
        abstract: "A batch image pipeline worker fed by a PostgreSQL job queue.",
        discussion: """
            Applications enqueue image jobs into halcyon.jobs (plain SQL or `halcyon enqueue`);
            `halcyon work` processes claim them, download the source, run the processor chain
            through ImageMagick and write the result into a content-addressed store.

            Database: --database-url, else DATABASE_URL, else the standard PG* variables, else an
            embedded PostgreSQL cluster under $HALCYON_HOME (default ./.halcyon), started on demand.
            """,
        subcommands: [
            Migrate.self, Enqueue.self, Work.self, Status.self, Show.self,
            Retry.self, Cancel.self, Prune.self, Sweep.self, Verify.self, Validate.self, Demo.self, Bench.self, Embedded.self,
        ]
    )
}

/// Options every command shares: logging.
struct LoggingOptions: ParsableArguments {
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = ProcessInfo.processInfo.environment["HALCYON_LOG_LEVEL"] ?? "info"

    @Option(help: "Log format: text or json.")
    var logFormat: String = ProcessInfo.processInfo.environment["HALCYON_LOG_FORMAT"] ?? "text"

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level '\(logLevel)'") }
        guard LogFormat(rawValue: logFormat) != nil else { throw ValidationError("--log-format must be text or json") }
    }

    func makeLogger(_ label: String = "halcyon") -> Logger {
        HalcyonLogHandler.bootstrap(format: LogFormat(rawValue: logFormat) ?? .text, level: Logger.Level(rawValue: logLevel) ?? .info)
        return Logger(label: label)
    }
}

/// Prints to standard error and exits non-zero.
struct CommandFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func printError(_ text: String) {
    writeToStandardError(text + "\n")
}
