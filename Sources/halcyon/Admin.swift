import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonCore
import HalcyonEmbedded
import HalcyonQueue

struct Retry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Requeue failed or cancelled jobs with a fresh attempt budget.")
    @OptionGroup var database: DatabaseOptions
    @Argument(help: "Job ids.")
    var ids: [Int64]

    func run() async throws {
        let (connection, _) = try await database.connect()
        let done = try await JobQueue(connection: connection).retry(ids: ids)
        report("requeued", done, of: ids)
    }
}

struct Cancel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Cancel queued or running jobs.",
        discussion: "A running job's worker notices at its next lease renewal (lease/3) and abandons it.")
    @OptionGroup var database: DatabaseOptions
    @Argument(help: "Job ids.")
    var ids: [Int64]

    func run() async throws {
        let (connection, _) = try await database.connect()
        let done = try await JobQueue(connection: connection).cancel(ids: ids)
        report("cancelled", done, of: ids)
    }
}

/// Prints what happened to each id; exits 1 when some id was not in a state the command acts on.
func report(_ verb: String, _ done: [Int64], of ids: [Int64]) {
    let skipped = ids.filter { !done.contains($0) }
    if !done.isEmpty { print("\(verb): \(done.sorted().map(String.init).joined(separator: " "))") }
    if !skipped.isEmpty {
        printError("not \(verb) (no such job, or not in a state this applies to): \(skipped.map(String.init).joined(separator: " "))")
        Foundation.exit(1)
    }
}

struct Prune: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete finished jobs older than a duration.",
        discussion: "Only rows are deleted; stored objects stay until the sweeper expires them.")
    @OptionGroup var database: DatabaseOptions
    @Option(help: "Age of finished_at beyond which rows go, e.g. 7d (at most 100 years).")
    var olderThan: TimeSpanArgument
    @Option(help: "States to prune (repeatable): succeeded, failed, cancelled. Default: all three.")
    var state: [String] = []

    func validate() throws {
        try olderThan.check("--older-than", 0...36_500 * 86_400)
        for s in state where !["succeeded", "failed", "cancelled"].contains(s) {
            throw ValidationError("--state must be succeeded, failed or cancelled")
        }
    }

    func run() async throws {
        let (connection, _) = try await database.connect()
        let states = state.isEmpty ? ["succeeded", "failed", "cancelled"] : state
        let n = try await JobQueue(connection: connection).prune(olderThan: olderThan.seconds, states: states)
        print("pruned \(n) jobs")
    }
}

struct Embedded: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
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
