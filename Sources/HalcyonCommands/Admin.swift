import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonDomain
import HalcyonEmbedded
import HalcyonQueue
import HalcyonRuntime
import HalcyonWorker

struct Retry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retry",
        abstract: "Requeue failed or cancelled jobs with a fresh attempt budget: by id, or every job matching filters.",
        discussion: """
            By id: halcyon retry 12 13. By filter: halcyon retry --code fetch.http_status --since 1h \
            [--state failed] [--queue Q] [--tag T] [--dry-run]; prints how many were requeued. \
            A job whose unique_key is held by another queued or running job is left as it is.
            """)
    @OptionGroup var database: DatabaseOptions
    @Argument(help: "Job ids (or use the filters).")
    var ids: [Int64] = []
    @OptionGroup var filter: FilterOptions

    func validate() throws { try filter.check(ids: ids, allowed: [.failed, .cancelled]) }

    func run() async throws {
        let (connection, _) = try await database.connect()
        let queue = JobQueue(connection: connection)
        if ids.isEmpty {
            try await filter.run(queue, verb: "requeued", allowed: [.failed, .cancelled]) { try await queue.retry($0) }
        } else {
            report("requeued", try await queue.retry(ids: ids), of: ids, in: database.described)
        }
    }
}

struct Cancel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel queued or running jobs: by id, or every job matching filters.",
        discussion: """
            A running job's worker notices at its next lease renewal (lease/3) and abandons it. \
            By filter: halcyon cancel --queue backfill [--state queued] [--code C] [--since 1h] \
            [--tag T] [--dry-run]; prints how many were cancelled.
            """)
    @OptionGroup var database: DatabaseOptions
    @Argument(help: "Job ids (or use the filters).")
    var ids: [Int64] = []
    @OptionGroup var filter: FilterOptions

    func validate() throws { try filter.check(ids: ids, allowed: [.queued, .running]) }

    func run() async throws {
        let (connection, _) = try await database.connect()
        let queue = JobQueue(connection: connection)
        if ids.isEmpty {
            try await filter.run(queue, verb: "cancelled", allowed: [.queued, .running]) { try await queue.cancel($0) }
        } else {
            report("cancelled", try await queue.cancel(ids: ids), of: ids, in: database.described)
        }
    }
}

/// The filters of bulk `retry` and `cancel`.
struct FilterOptions: ParsableArguments {
    @Option(help: "Only jobs in this state (repeatable; default: every state the command applies to).")
    var state: [String] = []
    @Option(help: "Only jobs whose last error has this code, e.g. fetch.http_status.")
    var code: String?
    @Option(help: "Only jobs finished (unfinished: created) within this long, e.g. 1h.")
    var since: TimeSpanArgument?
    @Option(help: "Only jobs of this queue.")
    var queue: String?
    @Option(help: "Only jobs with this tag.")
    var tag: String?
    @Flag(help: "Print how many jobs match; change nothing.")
    var dryRun = false

    var isEmpty: Bool { state.isEmpty && code == nil && since == nil && queue == nil && tag == nil }

    func check(ids: [Int64], allowed: [JobState]) throws {
        if ids.isEmpty && isEmpty {
            throw ValidationError("give job ids, or at least one filter (--state, --code, --since, --queue, --tag)")
        }
        if !ids.isEmpty && (!isEmpty || dryRun) { throw ValidationError("give either job ids or filters, not both") }
        for s in state where !allowed.map(\.rawValue).contains(s) {
            throw ValidationError("--state must be \(allowed.map(\.rawValue).joined(separator: " or ")) here")
        }
        try since?.check("--since", Prune.ages)
    }

    func filter(allowed: [JobState]) -> JobQueue.JobFilter {
        JobQueue.JobFilter(
            states: state.isEmpty ? allowed : state.compactMap(JobState.init(rawValue:)), code: code, since: since?.duration, queue: queue,
            tag: tag)
    }

    /// Counts (with --dry-run) or applies the operation, and prints how many jobs it touched.
    func run(_ jobs: JobQueue, verb: String, allowed: [JobState], _ apply: (JobQueue.JobFilter) async throws -> Int) async throws {
        let filter = filter(allowed: allowed)
        if dryRun {
            print("would be \(verb) (dry run): \(try await jobs.count(filter)) jobs")
        } else {
            print("\(verb): \(try await apply(filter)) jobs")
        }
    }
}

/// Prints what happened to each id; exits 1 when some id was not in a state the command acts on
/// (the message names `database`, where the ids were looked for).
func report(_ verb: String, _ done: [Int64], of ids: [Int64], in database: String) {
    let skipped = ids.filter { !done.contains($0) }
    if !done.isEmpty { print("\(verb): \(done.sorted().map(String.init).joined(separator: " "))") }
    if !skipped.isEmpty {
        printError(
            "not \(verb) (no such job in \(database), or not in a state this applies to): \(skipped.map(String.init).joined(separator: " "))")
        Foundation.exit(1)
    }
}

struct Prune: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Delete finished jobs older than a duration.",
        discussion: """
            Only rows are deleted, a batch of 1,000 at a time; stored objects stay until the \
            sweeper expires them. Rows whose webhook is still to be delivered stay. Workers can do \
            this on their own: halcyon work --retain-succeeded 7d --retain-failed 30d.
            """)
    /// The ages --older-than (and the filters' --since) take: a row's age, up to the rows
    /// retention's bound (`--retain-succeeded`).
    static let ages = Duration.zero...WorkerConfiguration.Settings.retainSucceeded.range.upperBound

    @OptionGroup var database: DatabaseOptions
    @Option(help: ArgumentHelp("Age of finished_at beyond which rows go, e.g. 7d (at most \(TimeSpan.format(ages.upperBound)))."))
    var olderThan: TimeSpanArgument
    @Option(help: "States to prune (repeatable): succeeded, failed, cancelled. Default: all three.")
    var state: [String] = []

    func validate() throws {
        try olderThan.check("--older-than", Self.ages)
        for s in state where JobState(rawValue: s)?.isFinished != true {
            throw ValidationError("--state must be succeeded, failed or cancelled")
        }
    }

    func run() async throws {
        let (connection, _) = try await database.connect()
        let states = state.isEmpty ? [JobState.succeeded, .failed, .cancelled] : state.compactMap(JobState.init(rawValue:))
        let pruned = try await JobQueue(connection: connection).prune(olderThan: olderThan.duration, states: states)
        print("pruned \(pruned.values.reduce(0, +)) jobs")
    }
}

struct Embedded: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "embedded",
        abstract: "Manage the embedded PostgreSQL cluster under $HALCYON_HOME.",
        discussion: "start: initialise/start it; stop: stop it; url: print its connection string.")
    @Argument(help: "start, stop or url.")
    var action: String

    func run() async throws {
        let cluster = EmbeddedCluster()
        switch action {
        case "start": try cluster.ensureRunning(); print(cluster.conninfo)
        case "stop": try cluster.stop(); print("stopped")
        case "url": print(cluster.conninfo)
        default: throw ValidationError("action must be start, stop or url")
        }
    }
}
