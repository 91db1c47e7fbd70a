import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import Logging

/// Writes each job's outcome to its row — success through the group commit, failure with its
/// retry schedule — unless the job is no longer this worker's, and frees its place.
struct OutcomeRecorder: Sendable {
    let configuration: WorkerConfiguration
    let queue: JobQueue
    let completions: CompletionBatcher
    let health: StoreHealth
    let state: WorkerState
    let metrics: Metrics
    let logger: Logger

    init(configuration: WorkerConfiguration, queue: JobQueue, health: StoreHealth, state: WorkerState, metrics: Metrics, logger: Logger) {
        self.configuration = configuration
        self.queue = queue
        self.health = health
        self.state = state
        self.metrics = metrics
        self.logger = logger
        completions = CompletionBatcher { [workerID = configuration.workerID] batch in
            try await queue.complete(batch: batch, workerID: workerID)
        }
    }

    /// Records one job's outcome (unless it is no longer ours) and frees its place; returns how
    /// the attempt ended.
    @discardableResult
    func record(
        _ plan: JobPlan, _ outcome: Result<JobResult, HalcyonError>, timings: StageTimings, cancel: CancellationFlag
    ) async
        -> JobOutcome
    {
        let job = plan.job, webhook = plan.wantsWebhook
        var log = logger
        for (key, value) in plan.logMetadata { log[metadataKey: key] = value }
        defer {
            state.withHeld { $0.drop(job) }
            state.wake.wake()
        }
        // Released at shutdown, cancelled or rescued: the row is no longer ours to write.
        guard state.withHeld({ $0.holds(job) }), !cancel.isCancelled else {
            log.debug("job abandoned; outcome not recorded")
            metrics.count(.abandoned)
            return .abandoned
        }
        // The slot is free once the result is in the store; writing the outcome (a group
        // commit, a round trip) overlaps the next claim instead of gating it.
        let hit: Bool = if case .success(let result) = outcome { result.cacheHit } else { false }
        _ = state.withHeld { $0.startRecording(job) }
        state.noteOutcome(hit: hit)
        state.wake.wake()
        switch outcome {
        case .success(let result): return await recordSuccess(job, result, webhook: webhook, timings: timings, log: log)
        case .failure(let error) where error.code == .accessDenied || error.code == .notWritable:
            await releaseRefused(job, error, log: log)
            return .released
        case .failure(let error): return await recordFailure(job, error, webhook: webhook, timings: timings, log: log)
        }
    }

    /// The store cannot take this worker's results (refused credentials, no space, read-only…):
    /// not the job's fault. The job goes back to `queued` with its attempt unspent, and the
    /// claimer stops claiming until the store takes writes again (`StoreHealth`).
    private func releaseRefused(_ job: Job, _ error: HalcyonError, log: Logger) async {
        health.noteRefused(error)
        log.info("job released without spending an attempt: the store cannot take its result", metadata: ["code": "\(error.code)"])
        let released = try? await recordOrGiveUp("release", log) { try await queue.release([job.claim], workerID: configuration.workerID) }
        let count = released.flatMap { $0 } ?? 0
        state.updateSummary { $0.released += count }
        metrics.count(.released, jobs: count)
    }

    private func recordSuccess(_ job: Job, _ result: JobResult, webhook: Bool, timings: StageTimings, log: Logger) async -> JobOutcome {
        let recorded: Bool?
        do {
            recorded = try await recordOrGiveUp("complete", log) {
                try await completions.complete((job.claim, result, timings))
            }
        } catch {
            await rejected(job, webhook: webhook, outcome: "success", error, log: log)
            return .rejected
        }
        if recorded == true {
            state.updateSummary { $0.succeeded += 1 }
            state.unreported(done: 1)
            if webhook { state.webhooksDue.wake() }
        }
        metrics.count(recorded == true ? .succeeded : .abandoned)
        log.debug("job succeeded", metadata: ["key": "\(result.key)", "path": "\(result.path)", "bytes": "\(result.bytes)"])
        return recorded == true ? .succeeded : .abandoned
    }

    private func recordFailure(_ job: Job, _ error: HalcyonError, webhook: Bool, timings: StageTimings, log: Logger) async -> JobOutcome {
        let delay = configuration.backoff.delay(afterAttempt: job.attempt)
        let recorded: JobQueue.FailOutcome?
        do {
            recorded = try await recordOrGiveUp("fail", log) {
                try await queue.fail(job.claim, workerID: configuration.workerID, error: error, retryDelay: delay, timings: timings)
            }
        } catch let refusal {
            await rejected(job, webhook: webhook, outcome: "failure (\(error.code))", refusal, log: log)
            return .rejected
        }
        var meta: Logger.Metadata = ["code": "\(error.code)", "message": "\(error.message)"]
        if let source = error.source { meta["source"] = "\(source.prefix(200))" }
        switch recorded {
        case .failed?:
            if webhook { state.webhooksDue.wake() }
            metrics.count(.failed, code: error.code)
            state.updateSummary { $0.failed += 1 }
            state.unreported(failed: 1)
            log.notice("job failed", metadata: meta)
            return .failed
        case .retryScheduled?:
            metrics.count(.retried, code: error.code)
            state.updateSummary { $0.retried += 1 }
            meta["retry_in"] = "\(TimeSpan.format(delay))"
            log.info("job failed; retry scheduled", metadata: meta)
            return .retried
        default:
            metrics.count(.abandoned, code: error.code)
            log.debug("job failure not recorded (no longer ours)", metadata: meta)
            return .abandoned
        }
    }

    /// The database refused an outcome for good (an application's trigger or constraint on
    /// `halcyon.jobs`): retrying the same statement would fail forever. The job fails at once
    /// with `worker.outcome_rejected`; if the database refuses that too, the refusal is noted on
    /// the row (if it takes that much) and the claim let go: its lease lapses and the rescue
    /// takes it. Logged as an error either way.
    private func rejected(_ job: Job, webhook: Bool, outcome: String, _ error: any Error, log: Logger) async {
        metrics.count(.rejected, code: .outcomeRejected)
        var meta: Logger.Metadata = ["code": "\(ErrorCode.outcomeRejected)", "error": "\(error)"]
        var rejection: JobQueue.Rejection?
        if let databaseError = error as? DatabaseError {
            rejection = try? await recordOrGiveUp("record the refusal", log) {
                try await queue.recordRejection(job.claim, workerID: configuration.workerID, outcome: outcome, error: databaseError)
            }
        }
        switch rejection {
        case .failed?:
            if webhook { state.webhooksDue.wake() }
            state.updateSummary { $0.failed += 1 }
            state.unreported(failed: 1)
            log.error("the database refused this job's \(outcome); the job failed with worker.outcome_rejected", metadata: meta)
        default:
            meta["noted_on_row"] = "\(rejection == .noted)"
            log.error(
                "the database refused this job's \(outcome), and its failure too; not retrying the writes — its lease will lapse and it will be rescued",
                metadata: meta)
        }
    }

    /// Retries a recording statement through database outages until it succeeds or the worker
    /// must stop at once (nil). A job whose outcome could not be written keeps its lease until it
    /// ends, and is then rescued and run again. An error that is not transient is thrown.
    func recordOrGiveUp<T: Sendable>(_ what: String, _ log: Logger, _ body: () async throws -> T) async throws -> T? {
        do {
            return try await DatabaseRetry().run("recording \(what)", logger: log, giveUpWhen: { state.stopRequests >= 2 }, body)
        } catch let error as DatabaseError where !error.isTransient {
            throw error
        } catch {
            return nil
        }
    }
}
