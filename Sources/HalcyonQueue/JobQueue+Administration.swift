import Foundation

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
        /// Default: `Job.defaultMaxAttempts`.
        public var maxAttempts: Int = Job.defaultMaxAttempts
        /// ISO-8601 instant, nil = now.
        public var runAt: String?
        public var queue: String = QueueName.default
        /// While a job with this key is queued or running, enqueueing returns that job instead.
        /// Its bytes: `uniqueKeyBytes`.
        public var uniqueKey: String?
        public var tags: [String] = []
        /// The share of its queue it is taken from (`FairKey`); nil: the common share.
        public var fairKey: String?
        /// The enqueuer's W3C trace context (`TraceContext`); nil: none.
        public var trace: TraceContext?

        /// What a unique key's bytes may be (the table's `jobs_unique_key_length` check says the same).
        public static let uniqueKeyBytes = 1...1024

        public init(source: String) { self.source = source }
    }

    /// An enqueued job's id, and whether it is new: false when its unique key was held by a
    /// queued or running job, whose id this is.
    public struct Enqueued: Sendable, Equatable {
        public var id: Int64
        public var inserted: Bool
    }

    /// Inserts a job through `halcyon.enqueue_job`.
    public func enqueue(_ job: NewJob) async throws -> Enqueued {
        try Self.enqueued(try await connection.row(SQL.Enqueue(job: job)))
    }

    /// Inserts many jobs in one transaction; all or nothing. Duplicates of a unique key (of an
    /// unfinished job, or of an earlier job in the batch) come back with `inserted` false.
    public func enqueue(batch jobs: [NewJob]) async throws -> [Enqueued] {
        try await connection.withLocked { c in
            try c.transactionLocked {
                try jobs.map { try Self.enqueued(try c.rowLocked(SQL.Enqueue(job: $0))) }
            }
        }
    }

    private static func enqueued(_ row: SQL.Enqueue.Row?) throws -> Enqueued {
        guard let row else { throw DatabaseError(message: "enqueue returned no id", connectionLost: false) }
        return row.enqueued
    }

    /// The whole row of job `id`, or nil.
    public func job(id: Int64) async throws -> JobRow? {
        try await connection.row(SQL.ShowJob(id: id))
    }

    /// Requeues failed or cancelled jobs; returns the ids requeued. A job whose unique key is
    /// held by another unfinished job stays as it is.
    public func retry(ids: [Int64]) async throws -> [Int64] {
        try await connection.rows(SQL.Retry(ids: ids)).map(\.id)
    }

    /// Cancels queued or running jobs; returns the ids cancelled.
    public func cancel(ids: [Int64]) async throws -> [Int64] {
        try await connection.rows(SQL.Cancel(ids: ids)).map(\.id)
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

        /// Writes $1–$7 of a filtered statement (admin.sql).
        func bind(_ p: inout QueryParameters) {
            p.add(code)
            p.add(since)
            p.add(queue)
            p.add(tag)
            p.add(sourceContains)
            p.add(from)
            p.add(to)
        }

        /// The states, as literals in the statement's `/*states*/` (a closed set: no quoting to
        /// get wrong).
        var slots: [String: QuerySlot] { ["states": .literals(states.map(\.rawValue))] }
    }

    /// Rows touched per statement of a bulk operation: short transactions, few locks at once.
    public static let bulkBatch = 1000

    /// How many jobs match `filter`.
    public func count(_ filter: JobFilter) async throws -> Int {
        try await connection.row(SQL.CountFiltered(filter: filter))?.n ?? 0
    }

    /// Requeues the failed or cancelled jobs matching `filter`, a batch at a time; returns how many.
    public func retry(_ filter: JobFilter) async throws -> Int {
        try await inBatches(filter) { SQL.RetryFiltered(batch: $0) }
    }

    /// Cancels the queued or running jobs matching `filter`, a batch at a time; returns how many.
    public func cancel(_ filter: JobFilter) async throws -> Int {
        try await inBatches(filter) { SQL.CancelFiltered(batch: $0) }
    }

    /// Runs a bulk statement a batch at a time over the rows that matched when it started (as of
    /// the database's clock then), so that it ends whatever happens to the rows meanwhile.
    private func inBatches<Q: Query>(_ filter: JobFilter, _ query: (SQL.FilteredBatch) -> Q) async throws -> Int {
        let asOf = try await connection.row(SQL.Now())?.now
        let statement = query(SQL.FilteredBatch(filter: filter, limit: Self.bulkBatch, asOf: asOf))
        var total = 0
        while true {
            let n = try await connection.rows(statement).count
            total += n
            if n < Self.bulkBatch { return total }
        }
    }

    /// Deletes finished jobs in `states` older than `olderThan`, a batch at a time (oldest first,
    /// each batch its own short statement), leaving those whose webhook is still to be
    /// delivered. Returns how many of each state went.
    public func prune(olderThan: Duration, states: [JobState]) async throws -> [JobState: Int] {
        var pruned: [JobState: Int] = [:]
        let batch = SQL.PruneBatch(states: states, olderThan: olderThan, limit: Self.bulkBatch)
        while true {
            let rows = try await connection.rows(batch)
            for row in rows { if let s = row.state { pruned[s, default: 0] += 1 } }
            if rows.count < Self.bulkBatch { return pruned }
        }
    }

    /// Records a retention run, and how long it took, for `halcyon status`.
    public func recordPrune(by: String, _ pruned: [JobState: Int], took: Duration) async throws {
        try await connection.run(SQL.RecordPrune(by: by, pruned: pruned, took: took))
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
        Dictionary(try await connection.rows(SQL.JobStates(ids: ids)).map { ($0.status.id, $0.status) }, uniquingKeysWith: { a, _ in a })
    }
}

/// A job's state (the `halcyon.job_state` enum).
public enum JobState: String, Sendable, CaseIterable, Codable {
    case queued, running, succeeded, failed, cancelled

    /// Succeeded, failed or cancelled: the job will not run again unless retried.
    public var isFinished: Bool { self == .succeeded || self == .failed || self == .cancelled }
}
