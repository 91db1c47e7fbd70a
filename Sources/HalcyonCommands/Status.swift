import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Counts by state and by queue (and which are paused), queue age, throughput, recent failures, retention and workers.")

    @OptionGroup var database: DatabaseOptions
    @Flag(help: "Print JSON instead of tables.")
    var json = false
    @Flag(help: "Redraw every --interval until interrupted.")
    var watch = false
    @Option(help: "Also count the jobs with this tag, by state.")
    var tag: String?
    @Option(help: ArgumentHelp(Self.intervalSetting.help))
    var interval = TimeSpanArgument(Self.intervalSetting.defaultValue)

    private static let intervalSetting = Setting.duration(
        "--interval", default: .seconds(2), .milliseconds(200)...(.hours(1)), "Refresh interval for --watch")

    func validate() throws {
        try interval.check(Self.intervalSetting)
    }

    func run() async throws {
        let (connection, _) = try await database.connect()
        let tty = isatty(STDOUT_FILENO) == 1
        while true {
            let status = try await QueueStatus.load(connection, tag: tag)
            let text = json ? status.json.prettyText : QueueStatusText.render(status)
            if watch && tty {
                print("\u{1B}[H\u{1B}[2J" + "halcyon status — every \(interval), Ctrl-C to stop\n\n" + text)
            } else {
                print(text)
            }
            guard watch else { return }
            fflush(nil)  // all streams: stdout, when it is a pipe
            try await Task.sleep(for: .seconds(interval.seconds))
        }
    }
}
