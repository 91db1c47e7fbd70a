import Foundation
import HalcyonDomain
import Synchronization

/// The queue operations a worker and the administration commands run. Every statement about a
/// held job is guarded by `state = 'running' AND locked_by = <this worker> AND attempt = <the
/// claim's attempt>`, so neither a stalled worker nor a worker that claimed the job again after
/// it was rescued can write an old attempt's outcome over the current one.
public struct JobQueue: Sendable {
    public let connection: PGConnection
    /// Whether queues with fleet-wide limits were lately found to be absent.
    let limitedQueues = LimitedQueuesProbe()

    public init(connection: PGConnection) {
        self.connection = connection
    }

    // MARK: Worker side

    /// Most bytes of row text (sources, options) one claim takes in: a claim of 250 rows must
    /// not bring 250 inline `data:` sources into memory at once.
    public static let maxClaimBytes = 64 << 20

    /// Claims up to `limit` runnable jobs for `workerID`, leasing them for `lease` —
    /// fewer when their rows hold more than `maxBytes` of text (but always the first). With
    /// `queues`, only from those queues, each at most its limit (nil: `limit`); without, from
    /// every queue. Paused queues are never claimed from. With `siblings`, also up to 16 queued
    /// jobs of the chosen jobs' sources enqueued right after them (claim.sql), so that a
    /// source's variants run as one group.
    ///
    /// Queues with fleet-wide limits (`halcyon.queues.max_running`, `max_per_second`,
    /// `max_running_per_key`) are claimed from first, in a transaction that locks their rows
    /// (`lockLimitedQueues`), so that no two workers' claims of such a queue overlap and each
    /// counts the other's; then the other queues, in one statement, with the slots left. When
    /// the lock finds no such queue, this `JobQueue` does not look again for a second
    /// (`LimitedQueuesProbe`): a queue given a limit meanwhile is left alone by the other
    /// statement until then, never claimed past its limit.
    public func claim(
        workerID: String, limit: Int, lease: Duration, queues: [(name: String, limit: Int?)] = [],
        maxBytes: Int = JobQueue.maxClaimBytes, siblings: Bool = true
    ) async throws -> [Job] {
        guard limit > 0 else { return [] }
        let open = SQL.Claim(
            workerID: workerID, limit: limit, lease: lease, maxBytes: maxBytes, queues: queues, siblings: siblings)
        var jobs: [Job] = []
        if limitedQueues.due() {
            var next = open
            next.limited = true
            let limited = next
            let names = queues.map(\.name)
            do {
                let found: (any: Bool, jobs: [Job]) = try await connection.withLocked { c in
                    try c.transactionLocked {
                        guard !(try c.rowsLocked(SQL.LockLimitedQueues(queues: names))).isEmpty else { return (false, []) }
                        return (true, try c.rowsLocked(limited).map(\.job))
                    }
                }
                if !found.any { limitedQueues.noneFound() }
                jobs = found.jobs
            } catch let error as DatabaseError where !error.isTransient {
                // A limited queue's state that the database refuses to compute with (a value
                // written by hand) must not stop the other queues: they are claimed as usual,
                // the limited ones looked at again after a second (`limitedClaimFailure`).
                limitedQueues.failed(error)
            }
        }
        guard jobs.count < limit else { return jobs }
        var rest = open
        rest.limit = limit - jobs.count
        // A queue's own limit ($6) counts what the limited claim took from it.
        rest.queues = queues.map { q in (q.name, q.limit.map { n in max(0, n - jobs.count { $0.queue == q.name }) }) }
        return jobs + (try await connection.rows(rest).map(\.job))
    }

    /// The latest refusal of the claim of queues with fleet-wide limits, with how many refusals
    /// there were since the last report — at most one report a minute (nil meanwhile, and when
    /// there was none). The worker logs it as a warning; the other queues were claimed anyway.
    public func limitedClaimFailure() -> (error: DatabaseError, count: Int)? {
        limitedQueues.report()
    }

    /// Takes keys without queued jobs out of the fair-share rotation (`halcyon.fair_turns`),
    /// at most `limit` of them; returns how many. Workers call it now and then.
    @discardableResult
    public func forgetIdleFairKeys(limit: Int = 1000) async throws -> Int {
        try await connection.row(SQL.ForgetIdleFairKeys(limit: limit))?.forgotten ?? 0
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

    /// Extends the leases of `claims` to `lease` from now, skipping rows another session has locked.
    public func heartbeat(_ claims: [Claim], workerID: String, lease: Duration) async throws -> Renewal {
        guard !claims.isEmpty else { return Renewal(renewed: [], locked: []) }
        var out = Renewal(renewed: [], locked: [])
        for row in try await connection.rows(SQL.HeartbeatJobs(claims: claims, workerID: workerID, lease: lease)) {
            if row.renewed { out.renewed.insert(row.id) } else { out.locked.insert(row.id) }
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
        return Set(try await connection.rows(SQL.Complete(workerID: workerID, batch: batch)).map(\.id))
    }

    /// The outcome of recording a failure.
    public enum FailOutcome: Sendable, Equatable {
        case retryScheduled
        case failed
        /// The job was no longer ours (cancelled or rescued meanwhile).
        case notOwned
    }

    /// Records a failed attempt: permanent errors, and transient ones on the last attempt,
    /// end in `failed`; other transient ones go back to `queued` after `retryDelay`.
    public func fail(
        _ claim: Claim, workerID: String, error: HalcyonError, retryDelay: Duration,
        timings: StageTimings = StageTimings()
    ) async throws -> FailOutcome {
        let fail = SQL.Fail(claim: claim, workerID: workerID, error: error, retryDelay: retryDelay, timings: timings)
        guard let row = try await connection.row(fail) else { return .notOwned }
        return row.state == .failed ? .failed : .retryScheduled
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
        let rejection = SQL.Rejection(claim: claim, workerID: workerID, error: e)
        do {
            return try await connection.row(SQL.FailRejected(rejection: rejection)) != nil ? .failed : .notOwned
        } catch let refused as DatabaseError where !refused.isTransient {
            return try await connection.row(SQL.MarkOutcomeRejected(rejection: rejection)) != nil ? .noted : .notOwned
        }
    }

    /// Puts jobs back to `queued` without spending their attempt (graceful stop).
    @discardableResult
    public func release(_ claims: [Claim], workerID: String) async throws -> Int {
        guard !claims.isEmpty else { return 0 }
        return try await connection.rows(SQL.Release(claims: claims, workerID: workerID)).count
    }

    /// Records the trace each held claim's spans are exported in (`trace_id`), one per claim.
    public func recordTraceIDs(_ traces: [(claim: Claim, traceID: String)], workerID: String) async throws {
        guard !traces.isEmpty else { return }
        try await connection.run(SQL.RecordTraceIDs(claims: traces.map(\.claim), workerID: workerID, traceIDs: traces.map(\.traceID)))
    }

    /// A job whose lease ended, after rescue.
    public struct Rescued: Sendable {
        public var id: Int64
        public var failed: Bool
    }

    /// Requeues (or fails, when out of attempts) running jobs whose lease has ended, leaving
    /// out `excluding`.
    public func rescueExpired(limit: Int = 1000, excluding: [Int64] = []) async throws -> [Rescued] {
        try await connection.rows(SQL.Rescue(scan: SQL.ExpiredScan(limit: limit, excluding: excluding))).map(\.rescued)
    }

    /// The running jobs whose lease has ended (without taking them), leaving out `excluding`.
    public func expiredLeases(limit: Int = 1000, excluding: [Int64] = []) async throws -> [Int64] {
        try await connection.rows(SQL.ExpiredLeases(scan: SQL.ExpiredScan(limit: limit, excluding: excluding))).map(\.id)
    }

    /// Rescues one job whose lease has ended; nil when it no longer needs it.
    public func rescue(id: Int64) async throws -> Rescued? {
        try await connection.row(SQL.RescueOne(id: id))?.rescued
    }

    /// Whether any job of `queues` (empty: every queue) is runnable now in an unpaused queue,
    /// and whether any is running anywhere.
    public func drainState(queues: [String] = []) async throws -> (runnable: Bool, running: Bool) {
        let r = try await connection.row(SQL.DrainCheck(queues: queues))
        return (r?.runnable ?? false, r?.running ?? false)
    }

    public func registerWorker(id: String, host: String, pid: Int32, concurrency: Int) async throws {
        try await connection.run(SQL.RegisterWorker(id: id, host: host, pid: Int(pid), concurrency: concurrency))
    }

    public func heartbeatWorker(id: String, done: Int, failed: Int) async throws {
        try await connection.run(SQL.HeartbeatWorker(id: id, done: done, failed: failed))
    }

    public func stopWorker(id: String) async throws {
        try await connection.run(SQL.StopWorker(id: id))
    }

    /// Counts for a progress line.
    public struct Progress: Sendable, Equatable {
        public var runnable = 0, running = 0, succeeded = 0, failed = 0
    }

    /// Runnable and running jobs now; succeeded and failed since `since`.
    public func progress(since: Date) async throws -> Progress {
        try await connection.row(SQL.ProgressCounts(since: since))?.progress ?? Progress()
    }
}

/// When a claim last found no queue with fleet-wide limits: for a second after, claims skip the
/// transaction that looks for them (three statements), so a fleet without limits pays for it
/// about once a second per worker.
final class LimitedQueuesProbe: Sendable {
    static let recheck: Duration = .seconds(1)
    private let noneUntil = Mutex<ContinuousClock.Instant?>(nil)

    /// Whether to look for limited queues now.
    func due() -> Bool { noneUntil.withLock { $0.map { ContinuousClock.now >= $0 } ?? true } }

    func noneFound() { noneUntil.withLock { $0 = ContinuousClock.now + Self.recheck } }

    /// How often a refusal of the limited claim is reported.
    static let reportEvery: Duration = .seconds(60)
    private struct Refusals {
        var latest: DatabaseError?
        var count = 0
        var reportedAt: ContinuousClock.Instant?
    }
    private let refusals = Mutex(Refusals())

    /// The limited claim was refused: looked at again after `recheck`, the refusal kept for `report()`.
    func failed(_ error: DatabaseError) {
        noneFound()
        refusals.withLock {
            $0.latest = error
            $0.count += 1
        }
    }

    func report() -> (error: DatabaseError, count: Int)? {
        refusals.withLock { r in
            let now = ContinuousClock.now
            guard let latest = r.latest, r.reportedAt.map({ now - $0 >= Self.reportEvery }) ?? true else { return nil }
            defer {
                r.latest = nil
                r.count = 0
                r.reportedAt = now
            }
            return (latest, r.count)
        }
    }
}

extension SQL.RescuedRow {
    var rescued: JobQueue.Rescued { JobQueue.Rescued(id: id, failed: state == .failed) }
}
