import Foundation
import HalcyonDomain
import HalcyonImage
import HalcyonQueue
import HalcyonRuntime
import HalcyonStore
import HalcyonTracing
import Logging
import ServiceLifecycle

/// A call made on the processing thread as a chain's image work starts, with the job's sources
/// (`Worker.init(…chainStarted:)`). Blocking is allowed: it runs where the image work runs.
public typealias ChainStartedHook = @Sendable (_ sources: [String]) -> Void

/// A worker: connects, registers in `halcyon.workers`, and runs its duties as services of one
/// `ServiceGroup` — the `Claimer` (claim, run, record, and at shutdown finish or release),
/// the `LeaseKeeper` (lease renewal, worker heartbeat), the `Rescuer` (expired leases), the
/// `StoreSweeper` (with row retention), the `UsageRollUpService`, the `QueueMetricsService` (with
/// metrics exported) and the `WebhookDeliverer`. The group shuts them down in reverse order: the claimer first (it stops
/// claiming and finishes or releases what it holds), the lease keeper last, so leases are
/// renewed until the last job is done.
///
/// `Worker` is itself a `Service`: put it in an application's `ServiceGroup`, or call `run()`.
/// A graceful shutdown of the enclosing group is a first `requestStop()`.
public final class Worker: Service, Sendable, CustomStringConvertible {
    /// Its name only: ServiceLifecycle logs each service's description, and a reflected one
    /// would print the whole configuration (secrets included) and cost start-up time.
    public var description: String { "Worker" }

    public let configuration: WorkerConfiguration
    /// This worker's counters and histograms.
    public let metrics: Metrics
    private let conninfo: String
    private let logger: Logger
    private let state: WorkerState
    private let chainStarted: ChainStartedHook?
    /// Exports the jobs' spans; nil with tracing off.
    private let tracer: JobTracer?

    /// How long the worker's last writes (its totals, "stopped") may take at exit.
    static let finalBookkeeping: Duration = .seconds(3)

    /// `chainStarted`: called on the processing thread as each chain's image work starts, with
    /// the job's sources (`JobRunner.chainStarted`); nil (the default) in production.
    public init(
        configuration: WorkerConfiguration, conninfo: String, logger: Logger, metrics: Metrics? = nil, chainStarted: ChainStartedHook? = nil
    ) {
        self.configuration = configuration
        self.chainStarted = chainStarted
        self.conninfo = conninfo
        let metrics =
            metrics
            ?? Metrics(processingSlots: configuration.concurrency, fetchSlots: configuration.fetchConcurrency, restarts: configuration.restarts)
        self.metrics = metrics
        state = WorkerState(metrics: metrics)
        var logger = logger
        logger[metadataKey: "worker"] = "\(configuration.workerID)"
        self.logger = logger
        tracer =
            configuration.tracing.isEnabled
            ? JobTracer(configuration: configuration.tracing, workerID: configuration.workerID, metrics: metrics, logger: logger) : nil
    }

    /// First call: stop claiming, let in-flight jobs finish within the grace period, release
    /// the rest. A second call releases at once. Safe to call before `run()` starts: a stop
    /// requested early is not lost.
    public func requestStop() {
        // Logged before the request takes effect: once it does, the worker may finish and the
        // process exit before this thread gets to write the line.
        let first = state.stopRequests == 0
        logger.info(first ? "stop requested: finishing in-flight jobs" : "second stop request: releasing in-flight jobs now")
        _ = state.requestStop()
        state.webhooksDue.wake()  // a draining worker finishing its deliveries stops them now
    }

    /// What the worker did so far (all of it once `run()` has returned).
    public var summary: WorkerSummary { state.summary }

    /// Why the worker is not healthy now, or nil: the store cannot take its results (refused
    /// credentials, no space, read-only, free space under `--store-min-free`), so it claims
    /// nothing. What `/healthz` answers with (503) while it lasts.
    public var unhealthy: String? { state.storePause?.description }

    /// The waits between the store's checks at start: 500 ms, doubling, at most 5 s, jittered.
    static let storeCheckBackoff = Backoff(base: .milliseconds(500), maximum: .seconds(5), jitter: WorkerConfiguration.retryJitter)

    /// At start: a store that refuses our credentials (or a directory we cannot write) stops the
    /// worker before it claims anything — every job would otherwise be downloaded, processed and
    /// failed. One that cannot be reached is retried for up to a minute, as the database is.
    static func checkAccess(to store: any ResultStore, logger: Logger, stopping: @escaping @Sendable () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        var attempt = 0
        while true {
            attempt += 1
            do throws(HalcyonError) {
                try await store.checkAccess()
                return
            } catch {
                if error.code == .accessDenied {
                    throw HalcyonError(
                        .accessDenied,
                        "the store \(store.location) refuses this worker's credentials (check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN): \(error.message)",
                        permanent: true)
                }
                guard !error.permanent, ContinuousClock.now < deadline, !stopping() else {
                    throw HalcyonError(error.code, "the store \(store.location) cannot be used: \(error.message)", permanent: true)
                }
                let wait = Self.storeCheckBackoff.delay(afterAttempt: attempt)
                logger.warning("the store cannot be reached; retrying", metadata: ["error": "\(error)", "retry_in": "\(TimeSpan.format(wait))"])
                try await Task.sleep(for: wait)
            }
        }
    }

    /// Stop requests so far.
    public var stopRequests: Int { state.stopRequests }

    /// Jobs claimed and not yet recorded or released.
    public var heldJobs: Int { state.withHeld { $0.count } }

    /// How long past `grace` a stopped worker's process may take to exit before `halcyon work`
    /// ends it regardless (releasing and the last bookkeeping fit well within), and how long
    /// after a second stop request: a call that never returns — a C library stuck in a loop, a
    /// server that stopped answering mid-request — must not keep a deploy waiting.
    public static let stopMargin: Duration = .seconds(15)
    public static let secondStopMargin: Duration = .seconds(10)

    /// Runs until stopped (or, with `drain`, until there is nothing left to do).
    public func run() async throws {
        let configuration = configuration
        try configuration.validate()
        let store = try configuration.store.open()
        try await Self.checkAccess(to: store, logger: logger, stopping: { self.state.stopRequests > 0 })
        StartupClock.step(logger, "store checked")
        let stopping = { self.state.stopRequests > 0 }
        // Claims and outcomes on one connection; heartbeats and rescues on another, so that a
        // slow outcome (a row lock, a busy server) never holds a lease renewal back. Both send
        // prepared statements unless a pooler in transaction mode is in between (poll-only).
        let preparing = !configuration.pollOnly
        let connection = try await DatabaseRetry().run("connect", logger: logger, giveUpWhen: stopping) { [conninfo] in
            try await PGConnection.connect(
                conninfo, label: "worker", statementTimeout: configuration.statementTimeout.seconds, preparing: preparing)
        }
        let maintenanceConnection = try await DatabaseRetry().run("connect", logger: logger, giveUpWhen: stopping) { [conninfo] in
            try await PGConnection.connect(
                conninfo, label: "maintenance", statementTimeout: configuration.maintenanceStatementTimeout.seconds, preparing: preparing)
        }
        let queue = JobQueue(connection: connection), maintenance = JobQueue(connection: maintenanceConnection)
        StartupClock.step(logger, "connected")
        try await DatabaseRetry().run("register", logger: logger, giveUpWhen: stopping) {
            try await queue.registerWorker(
                id: configuration.workerID, host: ProcessInfo.processInfo.hostName,
                pid: getpid(), concurrency: configuration.concurrency)
        }
        logStart(mmapThreshold: applyMmapThreshold())

        let listener = configuration.pollOnly ? nil : JobListener(conninfo: conninfo, logger: logger) { [wake = state.wake] in wake.wake() }
        listener?.start()
        defer { listener?.stop() }

        try await ServiceGroup(configuration: .init(services: services(queue: queue, maintenance: maintenance, store: store), logger: logger)).run()

        // The last bookkeeping waits a few seconds at most: a worker told to stop must not
        // hang on a database that stopped answering. The spans held are exported meanwhile,
        // within as long (and the grace): a collector that hangs never holds the exit back.
        async let flushed: Void? = tracer?.shutdown(within: min(configuration.grace, Self.finalBookkeeping))
        let unreported = state.takeUnreported()
        _ = await withTimeLimit(Self.finalBookkeeping.seconds) {
            try await maintenance.heartbeatWorker(id: configuration.workerID, done: unreported.done, failed: unreported.failed)
            try await maintenance.stopWorker(id: configuration.workerID)
            await connection.close()
            await maintenanceConnection.close()
        }
        _ = await flushed
        let summary = state.summary
        logger.info(
            "worker stopped",
            metadata: [
                "succeeded": "\(summary.succeeded)", "failed": "\(summary.failed)", "retried": "\(summary.retried)",
                "released": "\(summary.released)", "rescued": "\(summary.rescued)",
                "peak_rss_mb": "\((ProcessMemory.peakRSS(of: getpid()) ?? 0) / 1_000_000)",
            ])
    }

    /// The worker's duties in start order; the group shuts them down in reverse.
    private func services(queue: JobQueue, maintenance: JobQueue, store: any ResultStore) -> [ServiceGroupConfiguration.ServiceConfiguration] {
        let configuration = configuration
        let health = StoreHealth(store: store, configuration: configuration, state: state, metrics: metrics, logger: logger)
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: LeaseKeeper(configuration: configuration, queue: maintenance, state: state, logger: logger)),
            .init(service: Rescuer(configuration: configuration, queue: maintenance, state: state, metrics: metrics, logger: logger)),
        ]
        services.append(.init(service: UsageRollUpService(configuration: configuration, conninfo: conninfo, logger: logger)))
        if let interval = configuration.queueMetricsInterval {
            services.append(.init(service: QueueMetricsService(interval: interval, queue: maintenance, metrics: metrics, logger: logger)))
        }
        if configuration.sweepInterval > .zero {
            services.append(
                .init(
                    service: StoreSweeper(
                        configuration: configuration, store: store, health: health, conninfo: conninfo, metrics: metrics, logger: logger)))
        }
        // Shut down after the claimer: outcomes recorded at the end still get their deliveries started.
        services.append(
            .init(
                service: WebhookDeliverer(
                    worker: configuration, conninfo: conninfo, wake: state.webhooksDue,
                    stopRequested: { [state] in state.stopRequests > 0 }, tracer: tracer, logger: logger)))
        let recorder = OutcomeRecorder(configuration: configuration, queue: queue, health: health, state: state, metrics: metrics, logger: logger)
        let claimer = Claimer(
            configuration: configuration, queue: queue,
            runner: JobRunner(configuration: configuration, store: store, health: health, metrics: metrics, chainStarted: chainStarted),
            recorder: recorder, health: health, state: state, metrics: metrics, tracer: tracer, logger: logger)
        // Stopped or drained: the claimer returns, and the group shuts the rest down.
        services.append(.init(service: claimer, successTerminationBehavior: .gracefullyShutdownGroup))
        return services
    }

    /// The allocator's mmap threshold, as `configuration.mmapThreshold` asks (the environment's
    /// tunable wins); what is in force, for the start line.
    private func applyMmapThreshold() -> String {
        if ProcessMemory.tunablesSetMmapThreshold { return "GLIBC_TUNABLES" }
        guard configuration.mmapThreshold > 0 else { return "glibc-dynamic" }
        guard ProcessMemory.setMmapThreshold(configuration.mmapThreshold) else {
            logger.warning("glibc refused the mmap threshold; its dynamic one stays", metadata: ["bytes": "\(configuration.mmapThreshold)"])
            return "glibc-dynamic"
        }
        return "\(configuration.mmapThreshold)"
    }

    private func logStart(mmapThreshold: String) {
        let configuration = configuration
        logger.info(
            "worker started",
            metadata: StartupClock.metadata.merging([
                "concurrency": "\(configuration.concurrency)", "fetch_concurrency": "\(configuration.fetchConcurrency)",
                "lease": "\(TimeSpan.format(configuration.lease))", "mode": "\(configuration.pollOnly ? "poll" : "listen")",
                "store": "\(configuration.store)", "statement_timeout": "\(TimeSpan.format(configuration.statementTimeout))",
                "max_pixels": "\(configuration.limits.maxPixels)", "max_job_time": "\(TimeSpan.format(configuration.limits.maxJobTime))",
                "magick_policy": "\(MagickImage.policyDirectory ?? "system")",
                "mmap_threshold": "\(mmapThreshold)",
            ]) { $1 })
        if MagickImage.policyDirectory == nil {
            logger.warning("Halcyon's hardened ImageMagick policy.xml was not found (set HALCYON_POLICY_DIR); running under the system policy only")
        }
    }
}
