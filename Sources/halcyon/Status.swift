import ArgumentParser
import Foundation
import HalcyonCore
import HalcyonQueue

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Counts by state, queue age, throughput, recent failures and workers.")

    @OptionGroup var database: DatabaseOptions
    @Flag(help: "Print JSON instead of tables.")
    var json = false
    @Flag(help: "Redraw every --interval until interrupted.")
    var watch = false
    @Option(help: "Refresh interval for --watch, 200ms–1h.")
    var interval = TimeSpanArgument("2s")

    func validate() throws {
        try interval.check("--interval", 0.2...3600)
    }

    func run() async throws {
        let (connection, _) = try await database.connect()
        let tty = isatty(STDOUT_FILENO) == 1
        while true {
            let status = try await QueueStatus.load(connection)
            let text = json ? status.json.prettyText : Self.render(status)
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

    static func render(_ s: QueueStatus) -> String {
        var out = "JOBS\n"
        for c in s.counts { out += "  \(c.state.padding(toLength: 10, withPad: " ", startingAt: 0)) \(c.count)\n" }
        out += "  queued: \(s.runnable) runnable now, \(s.scheduled) scheduled for later"
        if let age = s.oldestRunnableAge { out += "; oldest runnable waited \(TimeSpan.format(age.rounded()))" }
        out += "\nTHROUGHPUT (finished)\n  last 1m: \(s.finishedLast1m)   last 5m: \(s.finishedLast5m)   last 15m: \(s.finishedLast15m)\n"
        out += "FAILURES (last 24h)\n"
        if s.failures.isEmpty { out += "  none\n" }
        for f in s.failures { out += "  \(f.code.padding(toLength: 28, withPad: " ", startingAt: 0)) \(String(f.count).padding(toLength: 6, withPad: " ", startingAt: 0)) \(f.latestMessage.prefix(100))\n" }
        out += "STORE\n"
        if let st = s.store {
            out += "  \(ByteSize.format(st.bytes))\(st.sizeLimit.map { " of \(ByteSize.format($0)) limit (\(Int((Double(st.bytes) / Double($0) * 100).rounded()))%)" } ?? ", no size limit"), \(st.files) files"
            out += " — at the last sweep, \(TimeSpan.format(st.age.rounded())) ago by \(st.sweptBy) (\(st.root))\n"
        } else {
            out += "  not swept yet (workers sweep every --sweep-interval; or run `halcyon sweep`)\n"
        }
        out += "WORKERS\n"
        if s.workers.isEmpty { out += "  none\n" }
        for w in s.workers {
            let age = ((w["heartbeat_age"] ?? nil).flatMap { Double($0) }).map { TimeSpan.format($0.rounded()) } ?? "?"
            out += "  \(((w["id"] ?? nil) ?? "?").padding(toLength: 28, withPad: " ", startingAt: 0)) \(((w["status"] ?? nil) ?? "?").padding(toLength: 8, withPad: " ", startingAt: 0)) heartbeat \(age) ago, done \((w["jobs_done"] ?? nil) ?? "0"), failed \((w["jobs_failed"] ?? nil) ?? "0")\n"
        }
        return out
    }
}
