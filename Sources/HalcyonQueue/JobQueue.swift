import Foundation
import HalcyonCore

/// The queue operations a worker and the administration commands run. Every statement about a
/// held job is guarded by `state = 'running' AND locked_by = <this worker> AND attempt = <the
/// claim's attempt>`, so neither a stalled worker nor a worker that claimed the job again after
/// it was rescued can write an old attempt's outcome over the current one.
public struct JobQueue: Sendable {
    public let connection: PGConnection

    public init(connection: PGConnection) {
        self.connection = connection
    }

    // MARK: Worker side

    /// Most bytes of row text (sources, options) one claim takes in: a claim of 250 rows must
    /// not bring 250 inline `data:` sources into memory at once.
    public static let maxClaimBytes = 64 << 20

    /// Claims up to `limit` runnable jobs for `workerID`, leasing them for `lease` seconds —
    /// fewer when their rows hold more than `maxBytes` of text (but always the first). With
    /// `queues`, only from those queues, each at most its limit (nil: `limit`); without, from
    /// every queue. Paused queues are never claimed from. With `siblings`, also up to 16 queued
    /// jobs of the chosen jobs' sources enqueued right after them (`SQL.claim`), so that a
    /// source's variants run as one group.
    public func claim(
        workerID: String, limit: Int, lease: Double, queues: [(name: String, limit: Int?)] = [],
        maxBytes: Int = JobQueue.maxClaimBytes, siblings: Bool = true
    ) async throws -> [Job] {
        guard limit > 0 else { return [] }
        let r = try await connection.execute(
            SQL.claim,
            [
                workerID, String(limit), String(lease), String(maxBytes),
                PGRows.textArrayLiteral(queues.map(\.name)),
                "{" + queues.map { $0.limit.map(String.init) ?? "NULL" }.joined(separator: ",") + "}",
                siblings ? "true" : "false",
            ])
        return (0..<r.count).compactMap { i in
            guard let id = r.value(i, "id").flatMap({ Int64($0) }), let source = r.value(i, "source") else { return nil }
            return Job(
                id: id, source: source,
                fallbackSources: PGRows.parseTextArray(r.value(i, "fallback_sources") ?? "{}"),
                processors: r.value(i, "processors") ?? "",
                cacheKey: r.value(i, "cache_key"),
                options: r.value(i, "options") ?? "{}",
                priority: r.value(i, "priority").flatMap { Int($0) } ?? 0,
                attempt: r.value(i, "attempt").flatMap { Int($0) } ?? 1,
                maxAttempts: r.value(i, "max_attempts").flatMap { Int($0) } ?? 5,
                queueWait: max(0, r.value(i, "queue_wait").flatMap { Double($0) } ?? 0),
                queue: r.value(i, "queue") ?? QueueName.default,
                presets: r.value(i, "presets").map(Preset.parse(map:)) ?? [:],
                claimedAt: r.value(i, "claimed_at"), isolatedKeys: r.value(i, "isolated_keys") == "t")
        }
    }

    /// What a heartbeat found.
    public struct Renewal: Sendable, Equatable {
        /// Claims still ours whose lease was extended.
        public var renewed: Set<Int64>
        /// Claims still ours but locked by another session just now (not renewed this time).
        public var locked: Set<Int64>
        /// Every claim still ours; the others were cancelled or rescued and must be abandoned.
        public var held: Set<Int64> { renewed.union(locked) }
    }

    /// Extends the leases of `claims`, skipping rows another session has locked.
    public func heartbeat(_ claims: [Claim], workerID: String, lease: Double) async throws -> Renewal {
        guard !claims.isEmpty else { return Renewal(renewed: [], locked: []) }
        let r = try await connection.execute(
            SQL.heartbeatJobs,
            [
                Self.idArray(claims.map(\.id)), Self.intArray(claims.map(\.attempt)),
                workerID, String(lease),
            ])
        var out = Renewal(renewed: [], locked: [])
        for row in r.rows {
            guard let id = row[0].flatMap({ Int64($0) }) else { continue }
            if row[1] == "t" { out.renewed.insert(id) } else { out.locked.insert(id) }
        }
        return out
    }

    /// Records success. Returns false when the claim was no longer ours. (The batch statement
    /// with one row: the worker's group commit and this share one guarded UPDATE.)
    public func complete(_ claim: Claim, workerID: String, result: JobResult, timings: StageTimings = StageTimings()) async throws -> Bool {
        try await complete(batch: [(claim, result, timings)], workerID: workerID).contains(claim.id)
    }

    /// Records many successes in one statement; returns the ids that were still ours (the rest
    /// were cancelled or rescued meanwhile and are left alone).
    public func complete(batch: [(claim: Claim, result: JobResult, timings: StageTimings)], workerID: String) async throws -> Set<Int64> {
        guard !batch.isEmpty else { return [] }
        let rows: [JSONValue] = batch.map { b in
            let r = b.result
            return [
                "id": .number(Double(b.claim.id)), "attempt": .number(Double(b.claim.attempt)),
                "claimed_at": b.claim.stamp.map { .string($0) } ?? .null,
                "result_key": .string(r.key), "result_digest": .string(r.digest),
                "result_path": .string(r.path), "result_bytes": .number(Double(r.bytes)), "result_width": .number(Double(r.width)),
                "result_height": .number(Double(r.height)), "result_format": .string(r.format), "cache_hit": .bool(r.cacheHit),
                "result_source": r.source.map { .string(SourceLabel.label($0)) } ?? .null, "timings": b.timings.json,
                "source_width": r.facts.map { .number(Double($0.width)) } ?? .null,
                "source_height": r.facts.map { .number(Double($0.height)) } ?? .null,
                "source_format": r.facts.map { .string($0.format) } ?? .null,
                "source_bytes": r.facts.map { .number(Double($0.bytes)) } ?? .null,
                // JSON text, relayed: the statement casts it.
                "source_meta": r.facts.map { .string($0.metaJSON) } ?? .null, "placeholders": r.placeholdersJSON.map { .string($0) } ?? .null,
            ]
        }
        let r = try await connection.execute(SQL.complete, [workerID, JSONValue.array(rows).jsonText])
        return Set(r.rows.compactMap { $0[0].flatMap { Int64($0) } })
    }

    /// The outcome of recording a failure.
    public enum FailOutcome: Sendable, Equatable {
        case retryScheduled
        case failed
        /// The job was no longer ours (cancelled or rescued meanwhile).
        case notOwned
    }

    /// Records a failed attempt: permanent errors, and transient ones on the last attempt,
    /// end in `failed`; other transient ones go back to `queued` after `retryDelay` seconds.
    public func fail(
        _ claim: Claim, workerID: String, error: HalcyonError, retryDelay: Double,
        timings: StageTimings = StageTimings()
    ) async throws -> FailOutcome {
        let r = try await connection.execute(
            SQL.fail,
            [
                String(claim.id), workerID, error.errorEntry.jsonText, error.description.prefix(utf8Bytes: 4096),
                error.permanent ? "true" : "false", String(retryDelay), timings.json.jsonText, String(claim.attempt), claim.stamp,
            ])
        guard r.count == 1 else { return .notOwned }
        return r.value(0, "state") == "failed" ? .failed : .retryScheduled
    }

    /// What became of an outcome the database refused.
    public enum Rejection: Sendable, Equatable {
        /// The job failed for good with `worker.outcome_rejected`.
        case failed
        /// The database refused that too; the refusal is noted on the row, which stays
        /// `running` until its lease lapses and the rescue takes it.
        case noted
        /// The claim was no longer ours.
        case notOwned
    }

    /// Records that the database refused a held claim's outcome (`worker.outcome_rejected`
    /// with the database's message): the job fails for good at once — or, when the database
    /// refuses that as well, the refusal is noted on the row and the job stays `running` until
    /// its lease lapses. Throws when even the note is refused.
    public func recordRejection(_ claim: Claim, workerID: String, outcome: String, error: DatabaseError) async throws -> Rejection {
        let e = HalcyonError(.outcomeRejected, "the database refused to record this attempt's \(outcome): \(error)")
        let params: [String?] = [
            String(claim.id), String(claim.attempt), workerID, e.errorEntry.jsonText, e.description.prefix(utf8Bytes: 4096), claim.stamp,
        ]
        do {
            return try await connection.execute(SQL.failRejected, params).count == 1 ? .failed : .notOwned
        } catch let refused as DatabaseError where !refused.isTransient {
            return try await connection.execute(SQL.markOutcomeRejected, params).count == 1 ? .noted : .notOwned
        }
    }

    /// Puts jobs back to `queued` without spending their attempt (graceful stop).
    @discardableResult
    public func release(_ claims: [Claim], workerID: String) async throws -> Int {
        guard !claims.isEmpty else { return 0 }
        return try await connection.execute(
            SQL.release,
            [
                Self.idArray(claims.map(\.id)), Self.intArray(claims.map(\.attempt)), workerID,
                "{" + claims.map { $0.stamp.map { "\"\($0)\"" } ?? "NULL" }.joined(separator: ",") + "}",
            ]
        ).count
    }

    /// A job whose lease ended, after rescue.
    public struct Rescued: Sendable {
        public var id: Int64
        public var failed: Bool
    }

    /// Requeues (or fails, when out of attempts) running jobs whose lease has ended, leaving
    /// out `excluding`.
    public func rescueExpired(limit: Int = 1000, excluding: [Int64] = []) async throws -> [Rescued] {
        Self.rescued(try await connection.execute(SQL.rescue, [String(limit), Self.idArray(excluding)]))
    }

    /// The running jobs whose lease has ended (without taking them), leaving out `excluding`.
    public func expiredLeases(limit: Int = 1000, excluding: [Int64] = []) async throws -> [Int64] {
        try await connection.execute(SQL.expiredLeases, [String(limit), Self.idArray(excluding)]).rows.compactMap { $0[0].flatMap { Int64($0) } }
    }

    /// Rescues one job whose lease has ended; nil when it no longer needs it.
    public func rescue(id: Int64) async throws -> Rescued? {
        Self.rescued(try await connection.execute(SQL.rescueOne, [String(id)])).first
    }

    private static func rescued(_ r: PGRows) -> [Rescued] {
        r.rows.compactMap { row in
            guard let id = row[0].flatMap({ Int64($0) }) else { return nil }
            return Rescued(id: id, failed: row[1] == "failed")
        }
    }

    /// Whether any job of `queues` (empty: every queue) is runnable now in an unpaused queue,
    /// and whether any is running anywhere.
    public func drainState(queues: [String] = []) async throws -> (runnable: Bool, running: Bool) {
        let r = try await connection.execute(SQL.drainCheck, [PGRows.textArrayLiteral(queues)])
        return (r.value(0, "runnable") == "t", r.value(0, "running") == "t")
    }

    public func registerWorker(id: String, host: String, pid: Int32, concurrency: Int) async throws {
        try await connection.execute(SQL.registerWorker, [id, host, String(pid), String(concurrency)])
    }

    public func heartbeatWorker(id: String, done: Int, failed: Int) async throws {
        try await connection.execute(SQL.heartbeatWorker, [id, String(done), String(failed)])
    }

    public func stopWorker(id: String) async throws {
        try await connection.execute(SQL.stopWorker, [id])
    }

    /// Counts for a progress line.
    public struct Progress: Sendable, Equatable {
        public var runnable = 0, running = 0, succeeded = 0, failed = 0
    }

    /// Runnable and running jobs now; succeeded and failed since `since`.
    public func progress(since: Date) async throws -> Progress {
        let r = try await connection.execute(SQL.progressCounts, [ISO8601.format(since)])
        func n(_ c: String) -> Int { r.value(0, c).flatMap { Int($0) } ?? 0 }
        return Progress(runnable: n("runnable"), running: n("running"), succeeded: n("succeeded"), failed: n("failed"))
    }

    static func idArray(_ ids: [Int64]) -> String {
        "{" + ids.map(String.init).joined(separator: ",") + "}"
    }

    static func intArray(_ values: [Int]) -> String {
        "{" + values.map(String.init).joined(separator: ",") + "}"
    }
}
