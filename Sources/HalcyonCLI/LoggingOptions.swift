import ArgumentParser
import Foundation
import HalcyonRuntime
import Logging

/// Options every command shares: logging.
package struct LoggingOptions: ParsableArguments {
    package init() {}

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    package var logLevel: String = ProcessInfo.processInfo.environment["HALCYON_LOG_LEVEL"] ?? "info"

    @Option(help: "Log format: text or json.")
    package var logFormat: String = ProcessInfo.processInfo.environment["HALCYON_LOG_FORMAT"] ?? "text"

    package func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level '\(logLevel)'") }
        guard LogFormat(rawValue: logFormat) != nil else { throw ValidationError("--log-format must be text or json") }
    }

    package func makeLogger(_ label: String = "halcyon") -> Logger {
        HalcyonLogHandler.bootstrap(format: LogFormat(rawValue: logFormat) ?? .text, level: Logger.Level(rawValue: logLevel) ?? .info)
        return Logger(label: label)
    }
}

/// Prints to standard error and exits non-zero.
package struct CommandFailure: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

package func printError(_ text: String) {
    writeToStandardError(text + "\n")
}
