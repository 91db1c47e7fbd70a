import HalcyonDomain
import HalcyonFetch
import HalcyonImage
import HalcyonQueue
import HalcyonRuntime
import HalcyonStore
import HalcyonTracing
import Logging
import ServiceLifecycle

/// The claim loop, as a service: claims batches of jobs while there are free slots (woken by
/// LISTEN/NOTIFY, a freed slot or the poll interval), runs each group of jobs that share a
/// source through the `JobRunner`, hands the outcomes to the `OutcomeRecorder`, and when told
/// to stop finishes what it holds within the grace period and releases the rest.
///
/// It returns on its own when stopped or drained, which shuts the worker's other services
/// down (`successTerminationBehavior: .gracefullyShutdownGroup`).
struct Claimer: Service, CustomStringConvertible {
    /// Its name only: ServiceLifecycle logs each service's description, and a reflected one
    /// would print the whole configuration (secrets included) and cost start-up time.
    var description: String { "Claimer" }

    let configuration: WorkerConfiguration
    let queue: JobQueue
    let runner: JobRunner
    let recorder: OutcomeRecorder
    let health: StoreHealth
    let state: WorkerState
    let metrics: Metrics
    /// Exports each traced attempt's spans; nil with tracing off.
    let tracer: JobTracer?
    let logger: Logger

    func run() async {
        await withGracefulShutdownHandler {
            await claimLoop()
            await finishInFlight()
        } onGracefulShutdown: { [state] in
            _ = state.requestStop()
        }
    }

    /// Claims until stopped or drained. Each claim runs in a task of its own that nothing awaits:
    /// at a stop the claimer waits for the jobs (`finishInFlight`), not for the tasks — a job
    /// stuck in one call of a C library never returns, and must not keep the worker from exiting.
    private func claimLoop() async {
        let stopping = { state.stopRequests > 0 }
        while !stopping() {
            // A store that cannot take results (refused credentials, no space, read-only…): no claims.
            await health.checkSpace()
            if health.isPaused {
                await health.waitUntilWritable()
                continue
            }
            // Mostly store hits: large claims, and no siblings (a hit decodes nothing to share).
            let hits = state.recentHits >= WorkerConfiguration.hitClaimRatio
            let limit = hits ? configuration.maxInFlightForHits : configuration.maxInFlight
            let occupying = state.withHeld { $0.occupyingSlots }
            let free = limit - occupying
            // A claim statement costs about a millisecond of the database's time however few
            // rows it takes, so claim several at a time where nothing waits for it. Hits finish
            // by the hundred: claim again when half of a hit claim is done. Misses: at once while
            // a processing slot has nothing after its job; with more in hand than that (jobs
            // downloading or waiting for a slot), when half the fetch-ahead is free.
            let enough = WorkerConfiguration.claimThreshold(
                hits: hits, limit: limit, occupying: occupying, concurrency: configuration.concurrency)
            let queues = queueLimits()
            var claimed: [Job] = []
            // Named queues all at their own limit: nothing to claim until one frees a slot.
            if free >= enough, queues.isEmpty || queues.contains(where: { $0.limit.map { $0 > 0 } ?? true }) {
                do {
                    claimed = try await DatabaseRetry().run(
                        "claim", logger: logger, giveUpWhen: stopping, retryIf: { _ in true },
                        wait: { await state.wake.wait(timeout: $0) }
                    ) {
                        try await queue.claim(
                            workerID: configuration.workerID, limit: free, lease: configuration.lease, queues: queues, siblings: !hits)
                    }
                } catch {
                    return  // stopping
                }
                if let refused = queue.limitedClaimFailure() {
                    logger.warning(
                        "the queues with fleet-wide limits could not be claimed from; the other queues were",
                        metadata: ["error": "\(refused.error)", "times": "\(refused.count)"])
                }
            }
            let named = JobPlan.presetNames(claimed)
            if !named.isEmpty {
                // Held while their presets are read: their leases are renewed, and a stop releases them.
                state.withHeld { held in claimed.forEach { held.hold($0, cancel: CancellationFlag()) } }
                guard let presets = await presets(named: named) else { return }  // a second stop request
                claimed = JobPlan.with(presets: presets, named: named, claimed)
            }
            if !claimed.isEmpty {
                var groups = JobPlan.groups(of: claimed, maxDataBytes: runner.fetcher.configuration.maxDataBytes)
                if let tracer {
                    let now = WallTime.now()
                    for g in groups.indices { for p in groups[g].indices { groups[g][p].trace = tracer.begin(groups[g][p].job, at: now) } }
                }
                let flags = groups.map { $0.map { _ in CancellationFlag() } }
                state.withHeld { held in
                    for (plans, flags) in zip(groups, flags) {
                        for (plan, flag) in zip(plans, flags) { held.hold(plan.job, cancel: flag) }
                    }
                }
                Task { await execute(groups, flags: flags) }
            }
            if !claimed.isEmpty && claimed.count == free { continue }  // probably more waiting
            if configuration.drain, claimed.isEmpty, state.withHeld({ $0.isEmpty }) {
                if let (runnable, running) = try? await queue.drainState(queues: configuration.queues.map(\.name)), !runnable, !running {
                    logger.info("drained: nothing runnable, nothing running")
                    return
                }
            }
            await state.wake.wait(timeout: configuration.pollInterval)
        }
    }

    /// The presets a claimed batch's chains name, read in one statement right after the claim,
    /// and retried through an outage as an outcome is (the jobs are claimed: they run, or a stop
    /// releases them); nil after a second stop request.
    private func presets(named: [String: Set<String>]) async -> [String: Preset]? {
        let names = named.values.reduce(into: Set<String>()) { $0.formUnion($1) }
        return try? await DatabaseRetry().run(
            "read presets", logger: logger, giveUpWhen: { state.stopRequests >= 2 }, retryIf: { _ in true },
            wait: { await state.wake.wait(timeout: $0) }
        ) {
            try await queue.presets(named: names)
        }
    }

    /// The queues to claim from, each with how many more of its jobs may take a slot now
    /// (nil: no limit of its own). Empty: every queue.
    private func queueLimits() -> [(name: String, limit: Int?)] {
        configuration.queues.map { q in
            (q.name, q.slots.map { slots in max(0, slots - state.withHeld { $0.occupyingSlots(queue: q.name) }) })
        }
    }

    /// Looks up a claim's stored results, then runs its groups side by side — while its traced
    /// jobs' trace ids are recorded, which no job waits for.
    private func execute(_ groups: [[JobPlan]], flags: [[CancellationFlag]]) async {
        async let traced: Void = recordTraceIDs(groups.flatMap { $0 })
        let hits = await runner.lookUp(groups.flatMap { $0 })
        await withDiscardingTaskGroup { group in
            for (plans, flags) in zip(groups, flags) {
                group.addTask { await execute(plans, flags: flags, hits: hits) }
            }
        }
        await traced
    }

    /// Records the trace each traced job's spans go to (`trace_id`) where the row does not hold
    /// it yet. A failure costs the jobs nothing: it is logged, and their spans exported all the same.
    private func recordTraceIDs(_ plans: [JobPlan]) async {
        let traces = plans.compactMap { plan -> (claim: Claim, traceID: String)? in
            guard let trace = plan.trace else { return nil }
            let id = trace.traceID.description
            return plan.job.recordedTraceID == id ? nil : (plan.job.claim, id)
        }
        guard !traces.isEmpty else { return }
        do {
            try await queue.recordTraceIDs(traces, workerID: configuration.workerID)
        } catch {
            logger.warning("could not record the jobs' trace ids", metadata: ["jobs": "\(traces.count)", "error": "\(error)"])
        }
    }

    /// Runs one group of jobs that share a source and records each outcome.
    private func execute(_ plans: [JobPlan], flags: [CancellationFlag], hits: JobRunner.StoreHits) async {
        for plan in plans {
            logger.debug(
                "job claimed", metadata: plan.logMetadata.merging(["queue_wait": "\(TimeSpan.format(plan.job.queueWait))"]) { a, _ in a })
        }
        let started = ContinuousClock.now
        let outcomes = await runner.run(plans, cancels: flags, hits: hits)
        let total = (ContinuousClock.now - started).seconds
        await withDiscardingTaskGroup { group in
            for (index, plan) in plans.enumerated() {
                var timings = outcomes[index].timings
                timings.total = total
                metrics.observe(timings)
                group.addTask {
                    let outcome = outcomes[index]
                    let recorded = await recorder.record(plan, outcome.result, timings: timings, cancel: flags[index])
                    if let tracer, let trace = plan.trace {
                        var error: HalcyonError?
                        if case .failure(let e) = outcome.result { error = e }
                        tracer.finish(plan.job, trace, stages: outcome.stages, links: outcome.links, outcome: recorded, error: error)
                    }
                }
            }
        }
    }

    /// Waits for in-flight jobs up to the grace period (or until a second stop request), then
    /// releases whatever is left without spending its attempt — but a job stuck in processing
    /// past its deadline (`--max-job-time`, as the supervisor counts it), which every stop would
    /// otherwise hand back unharmed, fails for good with `image.too_costly`.
    private func finishInFlight() async {
        let deadline = ContinuousClock.now + configuration.grace
        while !state.withHeld({ $0.isEmpty }), ContinuousClock.now < deadline, state.stopRequests < 2 {
            await state.wake.wait(timeout: .milliseconds(100))
        }
        // Still held while the release is written, so the lease keeper renews their leases:
        // a slow release must not let them lapse and be rescued (spending an attempt).
        var left = state.withHeld { $0.all }
        guard !left.isEmpty else { return }
        left.forEach { $0.cancel.cancel() }
        let stuck = Set(runner.processing.overdue(deadline: configuration.limits.maxJobTime, grace: .zero))
        if !stuck.isEmpty {
            await failStuck(left.map(\.claim).filter { stuck.contains($0.id) })
            left.removeAll { stuck.contains($0.claim.id) }
        }
        let claims = left.map(\.claim)
        defer { state.withHeld { $0.drop(claims) } }
        var released = 0
        do {
            // Retried through an outage until a second stop request, and then bounded in time.
            if let count = try await recorder.recordOrGiveUp(
                "release", logger,
                {
                    try await queue.release(claims, workerID: configuration.workerID)
                })
            {
                released = count
                if count < claims.count {
                    // Their outcome was being written as the grace ended, or they were cancelled
                    // or rescued meanwhile: either way no longer ours to release.
                    logger.info(
                        "some jobs were no longer ours to release (finished, cancelled or rescued meanwhile)",
                        metadata: ["not_released": "\(claims.count - count)"])
                }
            } else {
                logger.warning("the database did not answer; the unfinished jobs' leases will lapse", metadata: ["jobs": "\(claims.count)"])
            }
        } catch {
            logger.error("the database refused to release the unfinished jobs; their leases will lapse", metadata: ["error": "\(error)"])
        }
        state.updateSummary { $0.released += released }
        metrics.count(.released, jobs: released)
        logger.notice("released unfinished jobs without spending an attempt", metadata: ["count": "\(released)"])
    }

    /// At a stop: the jobs stuck in one call past their deadline fail for good, as the
    /// supervisor would have failed them had the worker not been stopped.
    private func failStuck(_ claims: [Claim]) async {
        defer { state.withHeld { $0.drop(claims) } }
        let error = HalcyonError(
            .tooCostly,
            "processing was stuck in one call past the \(TimeSpan.format(configuration.limits.maxJobTime)) limit (--max-job-time) when the worker was stopped",
            permanent: true)
        // Billed what they spent in processing up to now.
        runner.processing.sample()
        let spent = runner.processing.timings
        var failed = 0
        for claim in claims {
            let outcome = try? await recorder.recordOrGiveUp("fail a stuck job", logger) {
                try await queue.fail(
                    claim, workerID: configuration.workerID, error: error, retryDelay: .zero, timings: spent[claim.id] ?? StageTimings())
            }
            if outcome.flatMap({ $0 }) == .failed { failed += 1 }
        }
        state.updateSummary { $0.failed += failed }
        metrics.count(.failed, code: .tooCostly, jobs: failed)
        logger.error(
            "jobs stuck in one call past --max-job-time failed for good at the stop",
            metadata: ["jobs": "\(claims.map(\.id))", "failed": "\(failed)"])
    }
}
