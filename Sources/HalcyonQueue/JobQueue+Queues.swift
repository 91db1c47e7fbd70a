import Foundation

/// Named queues: pausing and resuming them. (Claiming from them is `claim(queues:)`.)
extension JobQueue {
    /// Pauses `name`: no worker claims its jobs until it is resumed; running jobs finish.
    /// Throws `QueueError.unknown` for a queue no job was ever enqueued to.
    public func pause(queue name: String) async throws {
        guard try await connection.row(SQL.PauseQueue(queue: name)) != nil else { throw try await unknown(name) }
    }

    /// Resumes `name` and wakes the listening workers.
    public func resume(queue name: String) async throws {
        guard try await connection.row(SQL.ResumeQueue(queue: name)) != nil else { throw try await unknown(name) }
    }

    /// Every known queue's name.
    public func queueNames() async throws -> [String] {
        try await connection.rows(SQL.QueueNames()).map(\.name)
    }

    /// Whether `name` keeps its results in a key space of its own (`isolated_keys`): its jobs'
    /// store keys are `StoreLayout.storeKey(resultKey, scope: name)`. False for an unknown queue.
    public func isolatesKeys(queue name: String) async throws -> Bool {
        try await connection.row(SQL.QueueIsolatesKeys(queue: name))?.isolatedKeys ?? false
    }

    /// `name`'s fleet-wide limits; nil for a queue that does not exist.
    public func limits(queue name: String) async throws -> QueueLimits? {
        try await connection.row(SQL.QueueLimitsOf(queue: name))?.limits
    }

    /// The queues with a fleet-wide limit (at most `most`, by name), with their limits and how
    /// many of their jobs run now across every worker.
    public func limitedQueues(most: Int) async throws -> [LimitedQueue] {
        try await connection.rows(SQL.LimitedQueues(most: most)).map(\.reading)
    }

    /// Sets `name`'s fleet-wide limits, all three at once (a nil one: none), creating the queue
    /// when no job has used it yet. Throws `QueueLimitsError` for a value out of range.
    public func setLimits(queue name: String, _ limits: QueueLimits) async throws {
        try limits.validate()
        if let problem = QueueName.problem(name) { throw QueueError.invalidName(problem) }
        try await connection.run(SQL.SetQueueLimits(queue: name, limits: limits))
    }

    private func unknown(_ name: String) async throws -> QueueError {
        QueueError.unknown(name, known: try await queueNames())
    }
}

/// What pausing or resuming a queue can fail with.
public enum QueueError: Error, CustomStringConvertible, Equatable {
    /// No such queue; `known` lists the queues there are.
    case unknown(String, known: [String])
    /// Not a queue name: why.
    case invalidName(String)

    public var description: String {
        switch self {
        case .invalidName(let problem): problem
        case .unknown(let name, let known):
            "no queue named '\(name.prefix(80))' (a queue exists once a job has been enqueued to it; known: \(known.joined(separator: ", ")))"
        }
    }
}
