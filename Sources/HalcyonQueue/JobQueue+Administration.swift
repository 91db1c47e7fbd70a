import Foundation
import HalcyonCore

/// What operators and applications do: enqueue, show, retry, cancel, prune.
extension JobQueue {

    /// A new job's fields, as `enqueue` takes them.
    public struct NewJob: Sendable {
        public var source: String
        public var processors: String = ""
        public var cacheKey: String?
        public var fallbackSources: [String] = []
        /// JSON object text.
        public var options: String = "{}"
        public var priority: Int = 0
        public var maxAttempts: Int = 5
        /// ISO-8601 instant, nil = now.
        public var runAt: String?

        public init(source: String) { self.source = source }

        /// The parameters of `SQL.enqueue`, in order.
        var parameters: [String?] {
            [
                source, processors, cacheKey, PGRows.textArrayLiteral(fallbackSources), options,
                String(priority), String(maxAttempts), runAt,
            ]
        }
    }

    /// Inserts a job through `halcyon.enqueue` and returns its id.
    public func enqueue(_ job: NewJob) async throws -> Int64 {
        let r = try await connection.execute(SQL.enqueue, job.parameters)
        guard let id = r.value(0, "id").flatMap({ Int64($0) }) else {
            throw DatabaseError(message: "enqueue returned no id", connectionLost: false)
        }
        return id
    }

    /// Inserts many jobs in one transaction; all or nothing.
    public func enqueue(batch jobs: [NewJob]) async throws -> [Int64] {
        try await connection.withLocked { c in
            try c.executeLocked("BEGIN")
            do {
                var ids: [Int64] = []
                ids.reserveCapacity(jobs.count)
                for job in jobs {
                    let r = try c.executeLocked(SQL.enqueue, job.parameters)
                    ids.append(Int64(r.value(0, "id") ?? "") ?? 0)
                }
                try c.executeLocked("COMMIT")
                return ids
            } catch {
                _ = try? c.executeLocked("ROLLBACK")
                throw error
            }
        }
    }

    /// The whole row of job `id`, or nil.
    public func show(id: Int64) async throws -> [String: String?]? {
        try await connection.execute(SQL.showJob, [String(id)]).dictionaries.first
    }

    /// Requeues failed or cancelled jobs; returns the ids requeued.
    public func retry(ids: [Int64]) async throws -> [Int64] {
        try await connection.execute(SQL.retry, [Self.idArray(ids)]).rows.compactMap { $0[0].flatMap { Int64($0) } }
    }

    /// Cancels queued or running jobs; returns the ids cancelled.
    public func cancel(ids: [Int64]) async throws -> [Int64] {
        try await connection.execute(SQL.cancel, [Self.idArray(ids)]).rows.compactMap { $0[0].flatMap { Int64($0) } }
    }

    /// Deletes finished jobs in `states` older than `olderThan` seconds; returns how many.
    public func prune(olderThan: Double, states: [String]) async throws -> Int {
        try await connection.execute(SQL.prune, [String(olderThan), PGRows.textArrayLiteral(states)]).affected
    }
}
