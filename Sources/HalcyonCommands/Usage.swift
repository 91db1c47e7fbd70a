import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import HalcyonWorker

struct UsageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "usage",
        abstract: "What each queue (or fair key) cost: jobs, CPU time by stage, bytes fetched and stored, store hits.",
        discussion: """
            Counts the attempts that ended since --since (taken back to the start of its hour, UTC: \
            usage is kept by the hour): the hours workers have rolled up plus the attempts not rolled \
            up yet, so it is exact at any moment. Rows are summed and ordered in the database and \
            printed a page at a time (--limit rows after --offset), then the sum of the rows not \
            printed and the total. Examples: halcyon usage; halcyon usage --by fair-key --since 7d \
            --queue thumbnails --sort cpu --limit 20; halcyon usage --by fair-key --fair-key user-42; \
            halcyon usage --since 2026-11-01T00:00:00Z --hourly --json.
            """)

    enum Grouping: String, ExpressibleByArgument, CaseIterable {
        case queue
        case fairKey = "fair-key"
    }

    @OptionGroup var database: DatabaseOptions
    @Option(
        help: ArgumentHelp(
            "From this long ago (\(TimeSpan.format(shortest))–\(TimeSpan.format(longest)), e.g. 24h, 7d) or this instant (ISO 8601, e.g. 2026-11-01T00:00:00Z)."
        ))
    var since = "24h"
    @Option(help: "One row per queue, or per queue and fair key (queue | fair-key).")
    var by = Grouping.queue
    @Option(help: "Only this queue.")
    var queue: String?
    @Option(help: "Only this fair key (\"\" for the common share); implies --by fair-key.")
    var fairKey: String?
    @Option(help: "The order: largest first by cpu, succeeded, failed, fetched or stored, or by queue, fair key and hour (key).")
    var sort = UsageRequest.Sort.key
    @Option(help: "Rows printed, at most (1–\(UsageRequest.maxLimit)).")
    var limit = 1000
    @Option(help: "Rows skipped before those printed (0–\(UsageRequest.maxOffset)): the next page starts where the last ended.")
    var offset = 0
    @Flag(help: "One row per hour too.")
    var hourly = false
    @Flag(help: "Print JSON instead of a table.")
    var json = false

    /// The longest period `--since` reaches back: the usage retention's bound (`--retain-usage`).
    static let longest = WorkerConfiguration.Settings.retainUsage.range.upperBound
    /// The shortest period `--since` takes.
    static let shortest: Duration = .seconds(60)

    /// The instant `--since` names, or why it names none.
    static func sinceInstant(_ text: String, now: Date = Date()) throws -> Date {
        if let instant = ISO8601.parse(text) {
            guard instant <= now else { throw ValidationError("--since \(text) is in the future") }
            guard now.timeIntervalSince(instant) <= longest.seconds else {
                throw ValidationError("--since \(text) is more than \(TimeSpan.format(longest)) ago")
            }
            return instant
        }
        guard let seconds = TimeSpan.parse(text) else {
            throw ValidationError("--since must be a duration (e.g. 24h, 7d) or an ISO 8601 instant (e.g. 2026-11-01T00:00:00Z); got '\(text)'")
        }
        guard seconds >= shortest.seconds, seconds <= longest.seconds else {
            throw ValidationError("--since must be from \(TimeSpan.format(shortest)) to \(TimeSpan.format(longest)); got \(text)")
        }
        return now.addingTimeInterval(-seconds)
    }

    func validate() throws {
        _ = try Self.sinceInstant(since)
        if let queue, let problem = QueueName.problem(queue) { throw ValidationError("--queue '\(queue)': \(problem)") }
        if let fairKey, fairKey.utf8.count > 200 { throw ValidationError("--fair-key is over 200 bytes (no fair key is longer)") }
        if let problem = request(since: Date()).problem { throw ValidationError("--" + problem) }
    }

    /// The report the options ask for, from `since`.
    func request(since: Date) -> UsageRequest {
        UsageRequest(
            since: since, byFairKey: by == .fairKey || fairKey != nil, hourly: hourly, queue: queue, fairKey: fairKey, sort: sort,
            limit: limit, offset: offset)
    }

    func run() async throws {
        let from = JobQueue.usageHour(try Self.sinceInstant(since))
        let (connection, _) = try await database.connect(settings: .reports)
        let request = request(since: from)
        let report = try await JobQueue(connection: connection).usage(request)
        if json {
            guard case .object(var value) = report.json() else { return }
            value["since"] = .string(ISO8601.format(from))
            value["by"] = .string(request.byFairKey ? Grouping.fairKey.rawValue : Grouping.queue.rawValue)
            value["hourly"] = .bool(hourly)
            value["queue"] = queue.map { .string($0) } ?? .null
            value["fair_key"] = fairKey.map { .string($0) } ?? .null
            print(JSONValue.object(value).prettyText)
        } else {
            print(UsageText.render(report), terminator: "")
        }
    }
}

extension UsageRequest.Sort: ExpressibleByArgument {}
