import Foundation
import HalcyonCore
import HalcyonImage
import HalcyonQueue
import HalcyonStore
import Logging
import Synchronization

/// What a worker did before it stopped.
public struct WorkerSummary: Sendable {
    public var succeeded = 0
    public var failed = 0
    public var retried = 0
    public var released = 0
    public var rescued = 0
}

/// The worker runtime: claims batches of jobs (LISTEN/NOTIFY wake-up, poll fallback), runs
/// each through `JobRunner` within its slots, renews leases, rescues jobs whose lease ended,
/// and on `requestStop()` finishes or releases what it holds.
public final class Worker: Sendable {
    public let configuration: WorkerConfiguration
    private let conninfo: String
    private let logger: Logger
    private let wake = WakeSignal()
    private let state = Mutex(RuntimeState())
    /// This worker's counters and histograms (`metricsText()` renders them).
    public let metrics: Metrics

    private struct RuntimeState {
        var stopRequests = 0
        var held = HeldJobs()
        var summary = WorkerSummary()
        /// Raised to stop the store sweep running in the background, if one is.
        var sweep: CancellationFlag?
        /// Counters not yet written to `halcyon.workers`.
        var unreportedDone = 0
        var unreportedFailed = 0
        /// Exponential average of recent outcomes being store hits (1) or anything else (0).
        var recentHits = 0.0
        /// Jobs the database refused to rescue (a trigger, a constraint), left out of rescues
        /// until the time given, so one such row neither blocks the others nor floods the log.
        var rescueRefused: [Int64: ContinuousClock.Instant] = [:]
    }

    /// Seconds the worker's last writes (its totals, "stopped") may take at exit.
    static let finalBookkeeping = 3.0

    /// How long a job the database refused to rescue is left out of rescues.
    static let rescueRefusedPause: Duration = .seconds(600)

    public init(configuration: WorkerConfiguration, conninfo: String, logger: Logger) {
        self.configuration = configuration
        self.conninfo = conninfo
        self.metrics = Metrics(processingSlots: configuration.concurrency, fetchSlots: configuration.fetchConcurrency)
        var logger = logger
        logger[metadataKey: "worker"] = "\(configuration.workerID)"
        self.logger = logger
    }

    /// First call: stop claiming, let in-flight jobs finish within the grace period, release
    /// the rest. A second call releases at once.
    public func requestStop() {
        let n = state.withLock { s in s.stopRequests += 1; return s.stopRequests }
        logger.info(n == 1 ? "stop requested: finishing in-flight jobs" : "second stop request: releasing in-flight jobs now")
        wake.wake()
    }

    private var stopRequests: Int { state.withLock { $0.stopRequests } }

    /// Runs until stopped (or, with `drain`, until there is nothing left to do).
    public func run() async throws -> WorkerSummary {
        let c = configuration
        let conninfo = self.conninfo
        // Claims and outcomes on one connection; heartbeats and rescues on another, so that a
        // slow outcome (a row lock, a busy server) never holds a lease renewal back.
        let db = try await retryingDatabase("connect", logger, giveUpWhen: { self.stopRequests > 0 }) {
            try await PGConnection.connect(conninfo, label: "worker", statementTimeout: c.statementTimeout)
        }
        let maintenanceDB = try await retryingDatabase("connect", logger, giveUpWhen: { self.stopRequests > 0 }) {
            try await PGConnection.connect(conninfo, label: "maintenance", statementTimeout: c.maintenanceStatementTimeout)
        }
        let queue = JobQueue(connection: db), maintenance = JobQueue(connection: maintenanceDB)
        try await retryingDatabase("register", logger, giveUpWhen: { self.stopRequests > 0 }) {
            try await queue.registerWorker(id: c.workerID, host: ProcessInfo.processInfo.hostName,
                                           pid: getpid(), concurrency: c.concurrency)
        }
        logger.info("worker started", metadata: [
            "concurrency": "\(c.concurrency)", "fetch_concurrency": "\(c.fetchConcurrency)",
            "lease": "\(TimeSpan.format(c.lease))", "mode": "\(c.pollOnly ? "poll" : "listen")", "store": "\(c.storeRoot.path)",
            "statement_timeout": "\(TimeSpan.format(c.statementTimeout))", "max_pixels": "\(c.limits.maxPixels)",
            "magick_policy": "\(MagickImage.policyDirectory ?? "system")",
        ])
        if MagickImage.policyDirectory == nil {
            logger.warning("Halcyon's hardened ImageMagick policy.xml was not found (set HALCYON_POLICY_DIR); running under the system policy only")
        }

        var listener: JobListener?
        if !c.pollOnly {
            let l = JobListener(conninfo: conninfo, logger: logger) { [wake] in wake.wake() }
            l.start()
            listener = l
        }
        defer { listener?.stop() }

        let runner = JobRunner(configuration: c, metrics: metrics)
        let completions = CompletionBatcher { [workerID = c.workerID] batch in
            try await queue.complete(batch: batch, workerID: workerID)
        }
        await withDiscardingTaskGroup { group in
            group.addTask { await self.maintenanceLoop(maintenance) }
            await self.claimLoop(queue, runner: runner, completions: completions, group: &group)
            await self.finishInFlight(queue)
            group.cancelAll()
        }
        // The last bookkeeping waits a few seconds at most: a worker told to stop must not
        // hang on a database that stopped answering.
        let unreported = takeUnreported()
        _ = await withTimeLimit(Self.finalBookkeeping) {
            try await maintenance.heartbeatWorker(id: c.workerID, done: unreported.done, failed: unreported.failed)
            try await maintenance.stopWorker(id: c.workerID)
            await db.close()
            await maintenanceDB.close()
        }
        let summary = state.withLock { $0.summary }
        logger.info("worker stopped", metadata: [
            "succeeded": "\(summary.succeeded)", "failed": "\(summary.failed)", "retried": "\(summary.retried)",
            "released": "\(summary.released)", "rescued": "\(summary.rescued)",
            "peak_rss_mb": "\((ProcessMemory.peakRSS(of: getpid()) ?? 0) / 1_000_000)",
        ])
        return summary
    }

    // MARK: Claiming

    private func claimLoop(_ queue: JobQueue, runner: JobRunner, completions: CompletionBatcher, group: inout DiscardingTaskGroup) async {
        let c = configuration
        var dbDelay = 0.1
        while stopRequests == 0 {
            let free = state.withLock { s in
                (s.recentHits >= WorkerConfiguration.hitClaimRatio ? c.maxInFlightForHits : c.maxInFlight) - s.held.occupyingSlots
            }
            var claimed: [Job] = []
            if free > 0 {
                do {
                    claimed = try await queue.claim(workerID: c.workerID, limit: free, lease: c.lease)
                    dbDelay = 0.1
                } catch {
                    logger.warning("claim failed; retrying", metadata: ["error": "\(error)", "retry_in": "\(TimeSpan.format(dbDelay))"])
                    await wake.wait(timeout: dbDelay)
                    dbDelay = min(dbDelay * 2, 10)
                    continue
                }
            }
            // Jobs of the batch that share a source run together: one download, one decode.
            for jobs in JobRunner.groups(claimed) {
                let flags = jobs.map { _ in CancellationFlag() }
                state.withLock { s in for (job, flag) in zip(jobs, flags) { s.held.hold(job, cancel: flag) } }
                group.addTask { await self.execute(jobs, flags: flags, runner: runner, queue: queue, completions: completions) }
            }
            if !claimed.isEmpty && claimed.count == free { continue }  // probably more waiting
            if c.drain, claimed.isEmpty, state.withLock({ $0.held.isEmpty }) {
                if let (runnable, running) = try? await queue.drainState(), !runnable, !running {
                    logger.info("drained: nothing runnable, nothing running")
                    return
                }
            }
            await wake.wait(timeout: c.pollInterval)
        }
    }

    // MARK: One job

    private func execute(_ jobs: [Job], flags: [CancellationFlag], runner: JobRunner, queue: JobQueue,
                         completions: CompletionBatcher) async {
        for job in jobs {
            logger.debug("job claimed", metadata: ["job": "\(job.id)", "attempt": "\(job.attempt)", "queue_wait": "\(TimeSpan.format(job.queueWait))"])
        }
        let started = ContinuousClock.now
        let outcomes = await runner.run(jobs, cancels: flags)
        let total = (ContinuousClock.now - started).seconds
        await withDiscardingTaskGroup { group in
            for (i, job) in jobs.enumerated() {
                var timings = outcomes[i].timings
                timings.total = total
                metrics.observe(timings)
                group.addTask {
                    await self.record(job, outcomes[i].result, timings: timings, queue: queue, completions: completions, cancel: flags[i])
                }
            }
        }
    }

    /// The Prometheus text of this worker's metrics.
    public func metricsText() -> String {
        metrics.render(inFlight: state.withLock { $0.held.count })
    }

    /// Writes one job's outcome (unless the job is no longer ours) and frees its place.
    private func record(_ job: Job, _ outcome: Result<JobResult, HalcyonError>, timings: StageTimings,
                        queue: JobQueue, completions: CompletionBatcher, cancel: CancellationFlag) async {
        var log = logger
        log[metadataKey: "job"] = "\(job.id)"
        log[metadataKey: "attempt"] = "\(job.attempt)"
        defer {
            state.withLock { $0.held.drop(job) }
            wake.wake()
        }
        // Released at shutdown, cancelled or rescued: the row is no longer ours to write.
        guard state.withLock({ $0.held.holds(job) }), !cancel.isCancelled else {
            log.debug("job abandoned; outcome not recorded")
            metrics.count("abandoned")
            return
        }
        // The slot is free once the result is in the store; writing the outcome (a group
        // commit, a round trip) overlaps the next claim instead of gating it.
        let hit: Bool = if case .success(let r) = outcome { r.cacheHit } else { false }
        state.withLock { s in
            s.held.startRecording(job)
            s.recentHits = 0.9 * s.recentHits + (hit ? 0.1 : 0)
        }
        wake.wake()
        let c = configuration
        switch outcome {
        case .success(let result):
            let recorded: Bool?
            do {
                recorded = try await recordOrGiveUp("complete", log) {
                    try await completions.complete((job.claim, result, timings))
                }
            } catch {
                await rejected(job, outcome: "success", error, queue: queue, log: log)
                return
            }
            state.withLock { s in
                if recorded == true { s.summary.succeeded += 1; s.unreportedDone += 1 }
            }
            metrics.count(recorded == true ? "succeeded" : "abandoned")
            log.debug("job succeeded", metadata: ["key": "\(result.key)", "path": "\(result.path)", "bytes": "\(result.bytes)"])
        case .failure(let error):
            let delay = c.backoff.delay(afterAttempt: job.attempt)
            let recorded: JobQueue.FailOutcome?
            do {
                recorded = try await recordOrGiveUp("fail", log) {
                    try await queue.fail(job.claim, workerID: c.workerID, error: error, retryDelay: delay, timings: timings)
                }
            } catch let refusal {
                await rejected(job, outcome: "failure (\(error.code))", refusal, queue: queue, log: log)
                return
            }
            switch recorded {
            case .failed?: metrics.count("failed", code: error.code.description)
            case .retryScheduled?: metrics.count("retried", code: error.code.description)
            default: metrics.count("abandoned", code: error.code.description)
            }
            state.withLock { s in
                switch recorded {
                case .failed?: s.summary.failed += 1; s.unreportedFailed += 1
                case .retryScheduled?: s.summary.retried += 1
                default: break
                }
            }
            var meta: Logger.Metadata = ["code": "\(error.code)", "message": "\(error.message)"]
            if let s = error.source { meta["source"] = "\(s.prefix(200))" }
            switch recorded {
            case .retryScheduled?:
                meta["retry_in"] = "\(TimeSpan.format(delay))"
                log.info("job failed; retry scheduled", metadata: meta)
            case .failed?:
                log.notice("job failed", metadata: meta)
            default:
                log.debug("job failure not recorded (no longer ours)", metadata: meta)
            }
        }
    }

    /// The database refused an outcome for good (an application's trigger or constraint on
    /// `halcyon.jobs`): retrying the same statement would fail forever. The refusal is noted on
    /// the row (`worker.outcome_rejected`, if the database takes that much), logged as an
    /// error, and the claim let go: its lease lapses and the rescue requeues it.
    private func rejected(_ job: Job, outcome: String, _ error: any Error, queue: JobQueue, log: Logger) async {
        metrics.count("rejected", code: ErrorCode.outcomeRejected.description)
        var meta: Logger.Metadata = ["code": "\(ErrorCode.outcomeRejected)", "error": "\(error)"]
        if let e = error as? DatabaseError {
            let noted = try? await recordOrGiveUp("note the refusal", log) {
                try await queue.markOutcomeRejected(job.claim, workerID: self.configuration.workerID, outcome: outcome, error: e)
            }
            meta["noted_on_row"] = "\(noted == true)"
        }
        log.error("the database refused this job's \(outcome); not retrying the write — its lease will lapse and it will be rescued", metadata: meta)
    }

    /// Retries a recording statement through database outages until it succeeds or the worker
    /// must stop at once (nil). A job whose outcome could not be written keeps its lease until it
    /// ends, and is then rescued and run again. An error that is not transient is thrown.
    private func recordOrGiveUp<T: Sendable>(_ what: String, _ log: Logger, _ body: () async throws -> T) async throws -> T? {
        do {
            return try await retryingDatabase("recording \(what)", log, giveUpWhen: { self.stopRequests >= 2 }, body)
        } catch let error as DatabaseError where !error.isTransient {
            throw error
        } catch {
            return nil
        }
    }

    /// Runs `body` until it succeeds, backing off 0.1 s → 10 s between transient failures, or
    /// until `giveUpWhen` says to stop, when the last error is thrown. An error that is not
    /// transient (`DatabaseError.isTransient`) is thrown at once.
    private func retryingDatabase<T>(_ what: String, _ log: Logger, giveUpWhen giveUp: () -> Bool,
                                     _ body: () async throws -> T) async throws -> T {
        var delay = 0.1
        while true {
            do { return try await body() } catch {
                if giveUp() { throw error }
                if let e = error as? DatabaseError, !e.isTransient { throw e }
                log.warning("\(what) failed; retrying", metadata: ["error": "\(error)", "retry_in": "\(TimeSpan.format(delay))"])
                try? await Task.sleep(for: .seconds(delay))
                delay = min(delay * 2, 10)
            }
        }
    }

    // MARK: Leases, rescue, worker heartbeat

    private func maintenanceLoop(_ queue: JobQueue) async {
        let c = configuration
        let heartbeatEvery = c.lease / 3
        var nextHeartbeat = ContinuousClock.now
        var nextRescue = ContinuousClock.now
        // The first sweep a little after start, so a fleet started together doesn't all try at once.
        var nextSweep = ContinuousClock.now + .seconds(c.sweepInterval > 0 ? min(c.sweepInterval, 5 + Double.random(in: 0...25)) : 1e9)
        var sweepTask: Task<Void, Never>?
        while !Task.isCancelled {
            let now = ContinuousClock.now
            if now >= nextHeartbeat {
                await heartbeat(queue)
                nextHeartbeat = now + .seconds(heartbeatEvery)
            }
            if now >= nextRescue {
                await rescue(queue)
                nextRescue = now + .seconds(c.effectiveRescueInterval)
            }
            if now >= nextSweep {
                // In the background: a sweep of a big store must not delay heartbeats.
                let flag = CancellationFlag()
                let idle = state.withLock { s -> Bool in
                    guard s.sweep == nil else { return false }
                    s.sweep = flag
                    return true
                }
                if idle {
                    sweepTask = Task {
                        await self.sweepStore(cancel: flag)
                        self.state.withLock { $0.sweep = nil }
                    }
                }
                nextSweep = now + .seconds(c.sweepInterval)
            }
            let next = min(nextHeartbeat, nextRescue, nextSweep)
            try? await Task.sleep(until: next, clock: .continuous)
        }
        // Stopping: a sweep in progress stops at its next file.
        state.withLock { $0.sweep }?.cancel()
        await sweepTask?.value
    }

    /// Sweeps the store if no other worker is sweeping (the sweep advisory lock).
    /// On a connection of its own: the sweep lock is a session lock held for the sweep's whole
    /// length, which must not depend on (or be dropped with) the connection heartbeats use.
    private func sweepStore(cancel: CancellationFlag) async {
        let c = configuration
        do {
            let connection = try await PGConnection.connect(conninfo, label: "sweep", statementTimeout: c.statementTimeout)
            defer { Task { await connection.close() } }
            let maintenance = StoreMaintenance(store: DiskStore(root: c.storeRoot), sizeLimit: c.storeSizeLimit, sweptBy: c.workerID)
            guard let report = try await maintenance.sweep(JobQueue(connection: connection), waitForLock: false, cancel: cancel) else {
                logger.debug("store sweep skipped: another worker is sweeping")
                return
            }
            metrics.swept(report)
            let meta = StoreMaintenance.metadata(report)
            if report.removedFiles + report.removedKeys + report.removedTempFiles > 0 {
                logger.info("store swept", metadata: meta)
            } else {
                logger.debug("store swept", metadata: meta)
            }
        } catch {
            logger.warning("store sweep failed", metadata: ["error": "\(error)"])
        }
    }

    private func heartbeat(_ queue: JobQueue) async {
        let c = configuration
        let claims = state.withLock { $0.held.claims }
        do {
            let renewal = try await queue.heartbeat(claims, workerID: c.workerID, lease: c.lease)
            if !renewal.locked.isEmpty {
                logger.info("leases not renewed this time: rows locked by another session", metadata: ["jobs": "\(renewal.locked.sorted())"])
            }
            // Cancelled by an operator, or rescued after we stalled: abandon it.
            for (id, cancel) in state.withLock({ $0.held.lost(from: claims, held: renewal.held) }) {
                cancel.cancel()
                logger.info("job no longer held (cancelled or rescued); abandoning", metadata: ["job": "\(id)"])
            }
            let counts = takeUnreported()
            try await queue.heartbeatWorker(id: c.workerID, done: counts.done, failed: counts.failed)
        } catch {
            logger.warning("heartbeat failed", metadata: ["error": "\(error)"])
        }
    }

    private func takeUnreported() -> (done: Int, failed: Int) {
        state.withLock { s in
            defer { s.unreportedDone = 0; s.unreportedFailed = 0 }
            return (s.unreportedDone, s.unreportedFailed)
        }
    }

    private func rescue(_ queue: JobQueue) async {
        let now = ContinuousClock.now
        let excluded = state.withLock { s -> [Int64] in
            s.rescueRefused = s.rescueRefused.filter { $0.value > now }
            return Array(s.rescueRefused.keys)
        }
        var rescued: [JobQueue.Rescued] = []
        do {
            rescued = try await queue.rescueExpired(excluding: excluded)
        } catch let error as DatabaseError where !error.isTransient {
            // One row the database refuses (a trigger, a constraint) fails the whole statement:
            // rescue row by row, and leave the refused ones out for a while.
            rescued = await rescueOneByOne(queue, excluding: excluded, after: error)
        } catch {
            logger.warning("rescue failed", metadata: ["error": "\(error)"])
        }
        guard !rescued.isEmpty else { return }
        state.withLock { $0.summary.rescued += rescued.count }
        metrics.rescued(rescued.count)
        logger.notice("rescued jobs whose lease ended", metadata: [
            "requeued": "\(rescued.filter { !$0.failed }.count)", "failed": "\(rescued.filter(\.failed).count)",
        ])
        wake.wake()
    }

    private func rescueOneByOne(_ queue: JobQueue, excluding: [Int64], after error: DatabaseError) async -> [JobQueue.Rescued] {
        logger.warning("the database refused a batch rescue; rescuing one job at a time", metadata: ["error": "\(error)"])
        var rescued: [JobQueue.Rescued] = []
        do {
            for id in try await queue.expiredLeases(excluding: excluding) {
                do {
                    if let r = try await queue.rescue(id: id) { rescued.append(r) }
                } catch let e as DatabaseError where !e.isTransient {
                    state.withLock { $0.rescueRefused[id] = ContinuousClock.now + Self.rescueRefusedPause }
                    logger.error("the database refused to rescue this job; leaving it for \(TimeSpan.format(Self.rescueRefusedPause.seconds))",
                                 metadata: ["job": "\(id)", "error": "\(e)"])
                }
            }
        } catch {
            logger.warning("rescue failed", metadata: ["error": "\(error)"])
        }
        return rescued
    }

    // MARK: Stopping

    /// Waits for in-flight jobs up to the grace period (or until a second stop request), then
    /// releases whatever is left without spending its attempt.
    private func finishInFlight(_ queue: JobQueue) async {
        let deadline = ContinuousClock.now + .seconds(configuration.grace)
        while !state.withLock({ $0.held.isEmpty }), ContinuousClock.now < deadline, stopRequests < 2 {
            await wake.wait(timeout: 0.1)
        }
        let left = state.withLock { $0.held.takeAll() }
        guard !left.isEmpty else { return }
        left.forEach { $0.cancel.cancel() }
        let claims = left.map(\.claim)
        var released = 0
        do {
            // Retried through an outage until a second stop request, and then bounded in time.
            if let n = try await recordOrGiveUp("release", logger, { try await queue.release(claims, workerID: self.configuration.workerID) }) {
                released = n
                if n < claims.count {
                    // Their outcome was being written as the grace ended, or they were cancelled
                    // or rescued meanwhile: either way no longer ours to release.
                    logger.info("some jobs were no longer ours to release (finished, cancelled or rescued meanwhile)",
                                metadata: ["not_released": "\(claims.count - n)"])
                }
            } else {
                logger.warning("the database did not answer; the unfinished jobs' leases will lapse", metadata: ["jobs": "\(claims.count)"])
            }
        } catch {
            logger.error("the database refused to release the unfinished jobs; their leases will lapse", metadata: ["error": "\(error)"])
        }
        state.withLock { $0.summary.released += released }
        metrics.count("released", jobs: released)
        logger.notice("released unfinished jobs without spending an attempt", metadata: ["count": "\(released)"])
    }
}
