import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonQueue

struct Pause: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Pause a queue: no worker claims its jobs until it is resumed; running jobs finish.",
        discussion: "A queue exists once a job has been enqueued to it; `halcyon status` lists them.")
    @OptionGroup var target: QueueTarget

    func run() async throws { try await target.apply("paused") { try await $0.pause(queue: $1) } }
}

struct Resume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "resume", abstract: "Resume a paused queue; listening workers are woken at once.")
    @OptionGroup var target: QueueTarget

    func run() async throws { try await target.apply("resumed") { try await $0.resume(queue: $1) } }
}

struct Limit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "limit",
        abstract: "Show or change a queue's fleet-wide limits, which every worker's claims obey.",
        discussion: """
            With no option, prints the queue's limits. Each option given sets that limit (`none` \
            removes it); the others stay as they are. The queue is created when no job has used \
            it yet. Limits hold across every worker: --max-running (1–1000000) caps the queue's \
            running jobs, --max-per-second (0.001–100000) its claims a second (a bucket of one \
            second's worth), --max-running-per-key (1–1000000) the running jobs of any one fair \
            key (jobs without a fair key count as one key).
            """)
    @OptionGroup var database: DatabaseOptions
    @Argument(help: "The queue's name.")
    var queue: String
    @Option(help: "At most this many of the queue's jobs running at once across every worker, or 'none'.")
    var maxRunning: String?
    @Option(help: "At most this many claims a second from the queue, or 'none'.")
    var maxPerSecond: String?
    @Option(help: "At most this many running jobs of any one fair key, or 'none'.")
    var maxRunningPerKey: String?

    /// `none`, or a value `parse` reads; nil when the option was not given.
    static func value<T>(_ text: String?, _ name: String, _ parse: (String) -> T?) throws -> T?? {
        guard let text else { return nil }
        if text == "none" { return .some(nil) }
        guard let v = parse(text) else { throw ValidationError("--\(name) takes a number or 'none', not '\(text.prefix(40))'") }
        return .some(v)
    }

    func run() async throws {
        if let problem = QueueName.problem(queue) { throw CommandFailure(problem) }
        let running = try Self.value(maxRunning, "max-running") { Int($0) }
        let rate = try Self.value(maxPerSecond, "max-per-second") { Double($0) }
        let perKey = try Self.value(maxRunningPerKey, "max-running-per-key") { Int($0) }
        let (connection, _) = try await database.connect()
        let q = JobQueue(connection: connection)
        var limits = try await q.limits(queue: queue) ?? QueueLimits()
        if running != nil || rate != nil || perKey != nil {
            if let running { limits.maxRunning = running }
            if let rate { limits.maxPerSecond = rate }
            if let perKey { limits.maxRunningPerKey = perKey }
            do {
                try await q.setLimits(queue: queue, limits)
            } catch let error as QueueLimitsError {
                throw CommandFailure("\(error)")
            }
        } else if try await q.limits(queue: queue) == nil {
            throw CommandFailure("\(QueueError.unknown(queue, known: try await q.queueNames()))")
        }
        print("\(queue): \(limits.summary ?? "no limits")")
    }
}

/// The queue `pause` and `resume` act on.
struct QueueTarget: ParsableArguments {
    @OptionGroup var database: DatabaseOptions
    @Argument(help: "The queue's name.")
    var queue: String

    /// Runs `change` on the queue and says so; an unknown queue is a clear error.
    func apply(_ verb: String, _ change: (JobQueue, String) async throws -> Void) async throws {
        let (connection, _) = try await database.connect()
        do {
            try await change(JobQueue(connection: connection), queue)
        } catch let error as QueueError {
            throw CommandFailure("\(error)")
        }
        print("\(verb) \(queue)")
    }
}
