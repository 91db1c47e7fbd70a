import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonQueue

struct Pause: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pause a queue: no worker claims its jobs until it is resumed; running jobs finish.",
        discussion: "A queue exists once a job has been enqueued to it; `halcyon status` lists them.")
    @OptionGroup var target: QueueTarget

    func run() async throws { try await target.apply("paused") { try await $0.pause(queue: $1) } }
}

struct Resume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Resume a paused queue; listening workers are woken at once.")
    @OptionGroup var target: QueueTarget

    func run() async throws { try await target.apply("resumed") { try await $0.resume(queue: $1) } }
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
