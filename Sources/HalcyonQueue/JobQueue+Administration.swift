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
        public var queue: String = QueueName.default
        /// While a job with this key is queued or running, enqueueing returns that job instead.
        public var uniqueKey: String?
        public var tags: [String] = []

        public init(source: String) { self.source = source }

        /// The parameters of `SQL.enqueue`, in order.
        var parameters: [String?] {
            [
                source, processors, cacheKey, PGRows.textArrayLiteral(fallbackSources), options,
                String(priority), String(maxAttempts), runAt, queue, uniqueKey, PGRows.textArrayLiteral(tags),
            ]
        }
    }

    /// An enqueued job's id, and whether it is new: false when its unique key was held by a
    /// queued or running job, whose id this is.
    public struct Enqueued: Sendable, Equatable {
        public var id: Int64
        public var inserted: Bool
    }

    /// Inserts a job through `halcyon.enqueue_job`.
    public func enqueue(_ job: NewJob) async throws -> Enqueued {
        try Self.enqueued(try await connection.execute(SQL.enqueue, job.parameters))
    }

    /// Inserts many jobs in one transaction; all or nothing. Duplicates of a unique key (of an
    /// unfinished job, or of an earlier job in the batch) come back with `inserted` false.
    public func enqueue(batch jobs: [NewJob]) async throws -> [Enqueued] {
        try await connection.withLocked { c in
            try c.executeLocked("BEGIN")
            do {
                var out: [Enqueued] = []
                out.reserveCapacity(jobs.count)
                for job in jobs { out.append(try Self.enqueued(try c.executeLocked(SQL.enqueue, job.parameters))) }
                try c.executeLocked("COMMIT")
                return out
            } catch {
                _ = try? c.executeLocked("ROLLBACK")
                throw error
            }
        }
    }

    private static func enqueued(_ r: PGRows) throws -> Enqueued {
        guard let id = r.value(0, "id").flatMap({ Int64($0) }) else {
            throw DatabaseError(message: "enqueue returned no id", connectionLost: false)
        }
        return Enqueued(id: id, inserted: r.value(0, "inserted") == "t")
    }

    /// The whole row of job `id`, or nil.
    public func show(id: Int64) async throws -> [String: String?]? {
        try await connection.execute(SQL.showJob, [String(id)]).dictionaries.first
    }

    /// Requeues failed or cancelled jobs; returns the ids requeued. A job whose unique key is
    /// held by another unfinished job stays as it is.
    public func retry(ids: [Int64]) async throws -> [Int64] {
        try await connection.execute(SQL.retry, [Self.idArray(ids)]).rows.compactMap { $0[0].flatMap { Int64($0) } }
    }

    /// Cancels queued or running jobs; returns the ids cancelled.
    public func cancel(ids: [Int64]) async throws -> [Int64] {
        try await connection.execute(SQL.cancel, [Self.idArray(ids)]).rows.compactMap { $0[0].flatMap { Int64($0) } }
    }

    /// Which jobs a bulk `retry` or `cancel` acts on. Nil fields match anything.
    public struct JobFilter: Sendable, Equatable {
        /// States to consider; the operation narrows them to those it applies to.
        public var states: [JobState]
        /// The code of the last error entry, e.g. `fetch.http_status`.
        public var code: String?
        /// Finished (unfinished: created) within this long.
        public var since: Duration?
        public var queue: String?
        public var tag: String?
        /// A substring of the source URL, matched literally, case-insensitively.
        public var sourceContains: String?
        /// Finished (unfinished: created) at or after this instant.
        public var from: Date?
        /// Finished (unfinished: created) before this instant.
        public var to: Date?

        public init(
            states: [JobState], code: String? = nil, since: Duration? = nil, queue: String? = nil, tag: String? = nil,
            sourceContains: String? = nil, from: Date? = nil, to: Date? = nil
        ) {
            self.states = states
            self.code = code
            self.since = since
            self.queue = queue
            self.tag = tag
            self.sourceContains = sourceContains
            self.from = from
            self.to = to
        }

        var parameters: [String?] {
            [code, since.map { String($0.seconds) }, queue, tag, sourceContains, from.map(ISO8601.format), to.map(ISO8601.format)]
        }

        /// `sql` with the states written in as literals (a closed set: no quoting to get wrong).
        func bind(_ sql: String) -> String {
            let states = states.isEmpty ? "NULL" : Set(states).map { "'\($0.rawValue)'" }.sorted().joined(separator: ", ")
            return sql.replacingOccurrences(of: SQL.filterStates, with: states)
        }
    }

    /// Rows touched per statement of a bulk operation: short transactions, few locks at once.
    public static let bulkBatch = 1000

    /// How many jobs match `filter`.
    public func count(_ filter: JobFilter) async throws -> Int {
        try await connection.execute(filter.bind(SQL.countFiltered), filter.parameters).value(0, "n").flatMap { Int($0) } ?? 0
    }

    /// Requeues the failed or cancelled jobs matching `filter`, a batch at a time; returns how many.
    public func retry(_ filter: JobFilter) async throws -> Int {
        try await inBatches(SQL.retryFiltered, filter)
    }

    /// Cancels the queued or running jobs matching `filter`, a batch at a time; returns how many.
    public func cancel(_ filter: JobFilter) async throws -> Int {
        try await inBatches(SQL.cancelFiltered, filter)
    }

    /// Runs a bulk statement a batch at a time over the rows that matched when it started (as of
    /// the database's clock then), so that it ends whatever happens to the rows meanwhile.
    private func inBatches(_ sql: String, _ filter: JobFilter) async throws -> Int {
        let asOf = try await connection.execute(SQL.now).value(0, "now")
        var total = 0
        while true {
            let n = try await connection.execute(filter.bind(sql), filter.parameters + [String(Self.bulkBatch), asOf]).count
            total += n
            if n < Self.bulkBatch { return total }
        }
    }

    /// Deletes finished jobs in `states` older than `olderThan`, a batch at a time (oldest first,
    /// each batch its own short statement), leaving those whose webhook is still to be
    /// delivered. Returns how many of each state went.
    public func prune(olderThan: Duration, states: [JobState]) async throws -> [JobState: Int] {
        var pruned: [JobState: Int] = [:]
        while true {
            let r = try await connection.execute(
                SQL.pruneBatch, [PGRows.textArrayLiteral(states.map(\.rawValue)), String(olderThan.seconds), String(Self.bulkBatch)])
            for row in r.rows { if let s = row[0].flatMap(JobState.init(rawValue:)) { pruned[s, default: 0] += 1 } }
            if r.count < Self.bulkBatch { return pruned }
        }
    }

    /// Records a retention run for `halcyon status`.
    public func recordPrune(by: String, _ pruned: [JobState: Int], seconds: Double) async throws {
        try await connection.execute(
            SQL.recordPrune,
            [by, String(pruned[.succeeded] ?? 0), String(pruned[.failed] ?? 0), String(pruned[.cancelled] ?? 0), String(seconds)])
    }

    /// A job's state as `wait` sees it.
    public struct JobStatus: Sendable, Equatable {
        public var id: Int64
        public var state: JobState
        /// The last error's code, for a failed job.
        public var code: String?
        public var cacheHit: Bool?
        public var resultPath: String?
    }

    /// The states of `ids`; an id missing from the answer has no row.
    public func states(of ids: [Int64]) async throws -> [Int64: JobStatus] {
        var out: [Int64: JobStatus] = [:]
        for row in try await connection.execute(SQL.jobStates, [Self.idArray(ids)]).dictionaries {
            guard let id = (row["id"] ?? nil).flatMap({ Int64($0) }), let state = (row["state"] ?? nil).flatMap(JobState.init(rawValue:)) else {
                continue
            }
            out[id] = JobStatus(
                id: id, state: state, code: row["code"] ?? nil, cacheHit: (row["cache_hit"] ?? nil).map { $0 == "t" },
                resultPath: row["result_path"] ?? nil)
        }
        return out
    }
}

/// A job's state (the `halcyon.job_state` enum).
public enum JobState: String, Sendable, CaseIterable, Codable {
    case queued, running, succeeded, failed, cancelled

    /// Succeeded, failed or cancelled: the job will not run again unless retried.
    public var isFinished: Bool { self == .succeeded || self == .failed || self == .cancelled }
}
