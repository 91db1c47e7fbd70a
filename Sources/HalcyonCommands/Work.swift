import ArgumentParser
import Dispatch
import Foundation
import HalcyonCLI
import HalcyonDomain
import HalcyonFetch
import HalcyonImage
import HalcyonQueue
import HalcyonRuntime
import HalcyonTracing
import HalcyonWorker
import Logging
import Metrics
import Prometheus
import ServiceLifecycle
import Synchronization

struct Work: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "work",
        abstract: "Run a worker: claim jobs, fetch, process, store, record.",
        discussion: """
            SIGTERM/SIGINT: stop claiming, let in-flight jobs finish within --grace, release the \
            rest to 'queued' without spending an attempt, exit 0. A second signal releases at once.

            Queues: --queue thumbnails --queue backfill=1 claims only from those queues, at most 1 \
            backfill job taking a processing slot at a time; without --queue, every queue. Paused \
            queues (halcyon pause) are never claimed from.

            Environment: HALCYON_FILE_ROOTS (comma-separated --file-root), HALCYON_ALLOW_NETWORKS \
            (comma-separated --allow-network), HALCYON_WEBHOOK_SECRET (space-separated --webhook-secret), \
            HALCYON_POLL_ONLY (--poll-only), HALCYON_STORE.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var logging: LoggingOptions
    @OptionGroup var sizeLimit: StoreSizeLimitOption

    @Option(help: ArgumentHelp(Settings.concurrency.help))
    var concurrency: Int?
    @Option(help: ArgumentHelp(Settings.fetchConcurrency.help))
    var fetchConcurrency = Settings.fetchConcurrency.defaultValue
    @Option(help: ArgumentHelp(Settings.hitClaimBatch.help))
    var hitClaimBatch = Settings.hitClaimBatch.defaultValue
    @Option(help: ArgumentHelp(Settings.lease.help))
    var lease = TimeSpanArgument(Settings.lease.defaultValue)
    @Option(help: ArgumentHelp(Settings.pollInterval.help))
    var pollInterval = TimeSpanArgument(Settings.pollInterval.defaultValue)
    @Flag(help: "Never LISTEN, poll only, and send no prepared statements (for PgBouncer transaction pooling; also HALCYON_POLL_ONLY=1).")
    var pollOnly = false
    @Flag(help: "Exit when no job is runnable now and none is running (jobs scheduled for later stay).")
    var drain = false
    @Option(help: "Worker id (default <host>-<pid>-<random>).")
    var workerID: String?
    @Flag(
        inversion: .prefixedNo,
        help:
            "Run the image work in a child process under a small supervisor: a crash there (a fault in a C library, the OOM killer, --max-memory) costs the jobs in processing an attempt (worker.crashed), releases the others, and a new child starts. --no-supervise runs everything in one process."
    )
    var supervise = true
    @Option(help: ArgumentHelp(SupervisorConfiguration.maxMemorySetting.help))
    var maxMemory: ByteSizeArgument?
    @Option(help: ArgumentHelp(Settings.grace.help))
    var grace = TimeSpanArgument(Settings.grace.defaultValue)
    @Option(help: ArgumentHelp(Settings.retryBase.help))
    var retryBase = TimeSpanArgument(Settings.retryBase.defaultValue)
    @Option(help: ArgumentHelp(Settings.statementTimeout.help))
    var statementTimeout = TimeSpanArgument(Settings.statementTimeout.defaultValue)
    @Option(name: .customLong("file-root"), help: "A directory file:// sources may read from (repeatable; also HALCYON_FILE_ROOTS).")
    var fileRoots: [String] = []
    @OptionGroup var network: AllowNetworkOptions
    @Option(help: ArgumentHelp(Fetch.retries.help))
    var fetchRetries = Fetch.retries.defaultValue
    @Option(help: ArgumentHelp(Fetch.retryInterval.help))
    var fetchRetryInterval = TimeSpanArgument(Fetch.retryInterval.defaultValue)
    @Option(help: "How the retry interval grows: fixed, accumulated (n × interval) or exponential (with jitter).")
    var fetchRetryBackoff = RetryOptions.defaultBackoff
    @Option(help: ArgumentHelp(Fetch.maxRetryWait.help))
    var maxRetryWait = TimeSpanArgument(Fetch.maxRetryWait.defaultValue)
    @Option(help: ArgumentHelp(Fetch.connectTimeout.help))
    var connectTimeout = TimeSpanArgument(Fetch.connectTimeout.defaultValue)
    @Option(help: ArgumentHelp(Fetch.totalTimeout.help))
    var fetchTimeout = TimeSpanArgument(Fetch.totalTimeout.defaultValue)
    @Option(help: ArgumentHelp(Fetch.maxBytes.help))
    var maxDownloadSize = ByteSizeArgument(Fetch.maxBytes.defaultValue)
    @Option(help: ArgumentHelp(Settings.maxPendingBytes.help))
    var maxPendingBytes: ByteSizeArgument?
    @Option(help: ArgumentHelp(Settings.mmapThreshold.help))
    var mmapThreshold = ByteSizeArgument(Settings.mmapThreshold.defaultValue)
    @Option(help: ArgumentHelp(ImageLimits.Settings.maxPixels.help))
    var maxPixels = PixelCountArgument(ImageLimits.Settings.maxPixels.defaultValue)
    @Option(help: ArgumentHelp(ImageLimits.Settings.maxJobTime.help))
    var maxJobTime = TimeSpanArgument(ImageLimits.Settings.maxJobTime.defaultValue)
    @Option(help: ArgumentHelp(Fetch.maxRedirects.help))
    var maxRedirects = Fetch.maxRedirects.defaultValue
    @Option(help: ArgumentHelp(Fetch.originalsTTL.help))
    var originalsTTL = TimeSpanArgument(Fetch.originalsTTL.defaultValue)
    @Option(help: ArgumentHelp(Settings.sweepInterval.help))
    var sweepInterval = TimeSpanArgument(Settings.sweepInterval.defaultValue)
    @Option(help: ArgumentHelp(Settings.storeMinFree.help))
    var storeMinFree = ByteSizeArgument(Settings.storeMinFree.defaultValue)
    @Option(help: "Serve Prometheus metrics on this port at /metrics (and /healthz). Default: off.")
    var metricsPort: Int?
    @Option(help: "Address the metrics port listens on (IPv4).")
    var metricsAddress: String = MetricsExporter.defaultAddress
    @Option(help: "Also write the metrics to this file every 15 s (atomically), for node_exporter's textfile collector (name it *.prom).")
    var metricsFile: String?
    @Flag(inversion: .prefixedNo, help: "With --drain: a progress line (live on a terminal, every 10 s otherwise).")
    var progress = true
    @Option(
        name: .customLong("queue"),
        help: "Claim from this queue, optionally with at most N of its jobs in processing at once: NAME or NAME=N (repeatable). Default: every queue."
    )
    var queues: [String] = []
    @Option(help: ArgumentHelp(Fetch.perHostConcurrency.help))
    var perHostConcurrency = Fetch.perHostConcurrency.defaultValue
    @OptionGroup var webhooks: WebhookOptions
    @Option(help: ArgumentHelp(Settings.retainSucceeded.help))
    var retainSucceeded: TimeSpanArgument?
    @Option(help: ArgumentHelp(Settings.retainFailed.help))
    var retainFailed: TimeSpanArgument?
    @Option(help: ArgumentHelp(Settings.retainUsage.help))
    var retainUsage = TimeSpanArgument(Settings.retainUsage.defaultValue)
    @Option(
        help: ArgumentHelp(
            "With tracing on (OTEL_EXPORTER_OTLP_ENDPOINT set), what a job's span is to the span that enqueued it (its traceparent): child (in the enqueuer's trace), link (a trace of its own, linked) or none. Also HALCYON_TRACE_PARENT. Default: child.",
            valueName: "mode"))
    var traceParent: TraceParentMode?

    /// Called as each chain's image work starts (`Halcyon.main(chainStarted:)`): nil in `halcyon`.
    static let chainStarted = Mutex<ChainStartedHook?>(nil)

    private typealias Settings = WorkerConfiguration.Settings
    private typealias Fetch = FetchConfiguration.Settings

    /// The configuration's own checks (every range, what settings must agree on), as usage errors.
    func validate() throws {
        let ports = MetricsExporter.ports
        if let p = metricsPort, !ports.contains(p) { throw ValidationError("--metrics-port must be \(ports.lowerBound)…\(ports.upperBound)") }
        let configuration: WorkerConfiguration
        do {
            configuration = try workerConfiguration()
        } catch let error as HalcyonError {
            throw ValidationError(error.message)
        }
        do {
            try configuration.validate()
            var supervisor = SupervisorConfiguration(workerID: configuration.workerID, arguments: [])
            supervisor.maxMemory = maxMemory?.bytes
            try supervisor.validate()
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// `--queue NAME[=N]` as written (the configuration checks names and slots).
    private func queueSlots() throws -> [QueueSlots] {
        try queues.map { entry in
            let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2 else { return QueueSlots(name: parts[0]) }
            guard let n = Int(parts[1]) else { throw ValidationError(Settings.queueSlotsProblem(entry)) }
            return QueueSlots(name: parts[0], slots: n)
        }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let channel = SupervisorChannel.fromEnvironment()
        StartupClock.step(logger, "options parsed")
        // An image process's first start follows its supervisor's check of the same database
        // by a moment (the supervisor passes the connection string on): it needs only the
        // string. After a restart, which may come much later, it checks again.
        let restarts = ProcessInfo.processInfo.environment[Supervisor.restartsKey].flatMap { Int($0) } ?? 0
        let conninfo = channel != nil && restarts == 0 ? try database.conninfo() : try await checkDatabase(logger)
        StartupClock.step(logger, "database checked")
        if supervise, channel == nil {
            return try await runSupervisor(conninfo: conninfo, logger: logger)
        }
        var configuration = try workerConfiguration()
        if let channel {
            configuration.supervisor = channel
            configuration.restarts = restarts
            // Reports to a supervisor that is gone fail with EPIPE, not a signal.
            signal(SIGPIPE, SIG_IGN)
        }

        // Every metric goes to one Prometheus registry, published by the exporter.
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(Metrics.prometheusFactory(registry: registry))
        let worker = Worker(configuration: configuration, conninfo: conninfo, logger: logger, chainStarted: Self.chainStarted.withLock { $0 })
        let group = try serviceGroup(worker, registry: registry, logger: logger)
        // Over a file-size limit (RLIMIT_FSIZE) a write should fail with EFBIG — a job's
        // store.write_failed — not kill the worker with SIGXFSZ.
        signal(SIGXFSZ, SIG_IGN)
        // Not ServiceGroup's UnixSignalsSequence: on Linux it is a DispatchSource, which loses a
        // signal sent right after start (see SignalForwarder). The first signal stops the worker
        // gracefully, the second releases its jobs at once (`Worker.requestStop`).
        // Supervised, stop requests come from the supervisor alone (see `Supervisor.stopSignal`).
        if channel != nil {
            signal(SIGTERM, SIG_IGN)
            signal(SIGINT, SIG_IGN)
        }
        // Whatever is stuck, the process exits within --grace and a margin of the first stop
        // request, and within a few seconds of the second (see `Worker.stopMargin`).
        let exitDeadline = ExitDeadline { waited in
            let held = worker.heldJobs
            logger.error(
                "the worker did not stop in time; exiting now", metadata: ["waited": "\(TimeSpan.format(waited))", "jobs_still_held": "\(held)"])
            Glibc.exit(held == 0 ? 0 : 1)
        }
        let grace = configuration.grace
        let stop: @Sendable () -> Void = {
            worker.requestStop()
            exitDeadline.arm(after: worker.stopRequests >= 2 ? Worker.secondStopMargin : grace + Worker.stopMargin)
        }
        let signals = SignalForwarder(signals: channel == nil ? [SIGTERM, SIGINT] : [Supervisor.stopSignal], handler: stop)
        defer { signals.cancel() }
        StartupClock.step(logger, "signal handlers installed")
        // A supervised process whose supervisor died stops as if told to (it is reparented).
        let orphanWatch = channel.map { _ in
            let parent = getppid()
            return Task.detached {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(500))
                    if getppid() != parent {
                        stop()
                        return
                    }
                }
            }
        }
        defer { orphanWatch?.cancel() }
        let progressLine = drain && progress ? ProgressReporter(conninfo: conninfo) : nil
        try await group.run()
        await progressLine?.finish()
    }

    /// `worker` and the metrics exporter these options ask for (`registry` published), as one
    /// group: what the image process runs, and what the suite runs in-process. The exporter
    /// first, so it is shut down last: its final write has the worker's totals. The worker starts
    /// once the metrics endpoint listens: a port in use ends the command before a job is claimed.
    func serviceGroup(_ worker: Worker, registry: PrometheusCollectorRegistry, logger: Logger) throws -> ServiceGroup {
        let exporter = try MetricsExporter(
            registry: registry, port: metricsPort, address: metricsAddress, file: metricsFile, logger: logger, unhealthy: { worker.unhealthy })
        return ServiceGroup(
            configuration: .init(
                services: [
                    .init(service: exporter),
                    .init(
                        service: StartingAfter(worker) { _ = try await exporter.listening() }, successTerminationBehavior: .gracefullyShutdownGroup),
                ], logger: logger))
    }

    /// `halcyon work` as the supervisor of a child that does the work (the same command line,
    /// with the worker id fixed); returns when the child exits by itself, with its status.
    private func runSupervisor(conninfo: String, logger: Logger) async throws {
        let id = workerID ?? WorkerConfiguration.defaultWorkerID()
        var configuration = SupervisorConfiguration(
            workerID: id, arguments: Array(CommandLine.arguments.dropFirst()) + (workerID == nil ? ["--worker-id", id] : []))
        configuration.maxMemory = maxMemory?.bytes
        configuration.maxJobTime = maxJobTime.duration
        configuration.statementTimeout = statementTimeout.duration
        configuration.grace = grace.duration
        try configuration.validate()
        // The child reaches the database the supervisor checked (the embedded cluster it may
        // have started included); a --database-url on the command line says the same.
        setenv("DATABASE_URL", conninfo, 1)
        let supervisor = Supervisor(configuration: configuration, conninfo: conninfo, logger: logger)
        let signals = SignalForwarder(signals: [SIGTERM, SIGINT]) { supervisor.requestStop() }
        defer { signals.cancel() }
        let status = await supervisor.run()
        if status != 0 { throw ExitCode(status) }
    }

    /// The worker's configuration from the options and `environment`'s variables (not yet
    /// checked). The suite's in-process workers are configured here too, from the same options.
    func workerConfiguration(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> WorkerConfiguration {
        var configuration = WorkerConfiguration(
            store: try storeOptions.location(environment: environment), workerID: workerID, concurrency: concurrency)
        configuration.fetchConcurrency = fetchConcurrency
        configuration.hitClaimBatch = hitClaimBatch
        configuration.lease = lease.duration
        configuration.pollInterval = pollInterval.duration
        configuration.pollOnly = pollOnly || PollOnlyEnvironment.isSet(in: environment)
        configuration.drain = drain
        // Exported metrics include the fleet's queue limits, read as often as the file is written.
        configuration.queueMetricsInterval = metricsPort != nil || metricsFile != nil ? MetricsExporter.fileInterval : nil
        configuration.grace = grace.duration
        configuration.backoff.base = retryBase.duration
        configuration.statementTimeout = statementTimeout.duration
        configuration.maxPendingBytes = maxPendingBytes?.bytes ?? WorkerConfiguration.pendingBytes(maxMemory: maxMemory?.bytes)
        configuration.mmapThreshold = mmapThreshold.bytes
        configuration.limits.maxPixels = maxPixels.pixels
        configuration.limits.maxJobTime = maxJobTime.duration
        configuration.sweepInterval = sweepInterval.duration
        configuration.storeSizeLimit = sizeLimit.bytes
        configuration.storeMinFree = storeMinFree.bytes
        configuration.queues = try queueSlots()
        configuration.webhooks = webhooks.configuration(environment)
        configuration.retainSucceeded = retainSucceeded?.duration
        configuration.retainFailed = retainFailed?.duration
        configuration.retainUsage = retainUsage.duration
        configuration.tracing = try TracingConfiguration(environment: environment)
        if let mode = traceParent ?? environment["HALCYON_TRACE_PARENT"].flatMap(TraceParentMode.init(rawValue:)) {
            configuration.tracing.parentMode = mode
        } else if let text = environment["HALCYON_TRACE_PARENT"], !text.isEmpty {
            throw ValidationError("HALCYON_TRACE_PARENT must be child, link or none, not '\(text.prefix(40))'")
        }
        var fetch = configuration.fetch
        let environmentRoots = (environment["HALCYON_FILE_ROOTS"] ?? "").split(separator: ",").map(String.init)
        fetch.fileRoots = (fileRoots + environmentRoots).filter { !$0.isEmpty }
        fetch.addressPolicy = network.policy(environment)
        fetch.retry = DelayRetryStrategy(RetryOptions(max: fetchRetries, interval: fetchRetryInterval.seconds, backoff: fetchRetryBackoff))
        fetch.maxRetryWait = maxRetryWait.duration
        fetch.connectTimeout = connectTimeout.duration
        fetch.totalTimeout = fetchTimeout.duration
        (fetch.maxBytes, fetch.maxBytesReason) = FetchConfiguration.downloadLimit(maxDownloadSize.bytes, maxMemory: maxMemory?.bytes)
        fetch.maxRedirects = maxRedirects
        fetch.perHostConcurrency = perHostConcurrency
        fetch.originalsTTL = originalsTTL.duration
        // s3:// sources: the AWS variables, read once here (HALCYON_S3_SOURCE_BUCKETS limits the buckets).
        try fetch.readS3Environment(environment)
        configuration.fetch = fetch
        return configuration
    }
}

extension Work {
    /// Connects once to check the schema. A database that is down or dropping connections
    /// (restarting, failing over) is retried with backoff for up to a minute — a worker started
    /// beside its database should wait for it; anything else (a bad URL, a missing schema)
    /// fails at once.
    func checkDatabase(_ logger: Logger) async throws -> String {
        let deadline = ContinuousClock.now + .seconds(60)
        return try await DatabaseRetry(maximum: .seconds(5)).run(
            "connect at start (the database is unavailable)", logger: logger,
            giveUpWhen: { ContinuousClock.now >= deadline },
            retryIf: { ($0 as? DatabaseError)?.connectionLost == true }
        ) {
            let (connection, conninfo) = try await database.connect()
            await connection.close()
            return conninfo
        }
    }
}

/// Runs `service` once `ready` has returned (and not at all when it throws).
private struct StartingAfter<Wrapped: Service>: Service, CustomStringConvertible {
    let service: Wrapped
    let ready: @Sendable () async throws -> Void
    var description: String { "\(service) (once the metrics endpoint listens)" }

    init(_ service: Wrapped, ready: @escaping @Sendable () async throws -> Void) {
        self.service = service
        self.ready = ready
    }

    func run() async throws {
        try await ready()
        try await service.run()
    }
}

extension TraceParentMode: ExpressibleByArgument {}
