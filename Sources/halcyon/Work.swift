import ArgumentParser
import Dispatch
import Foundation
import HalcyonCLI
import HalcyonCore
import HalcyonFetch
import HalcyonQueue
import HalcyonWorker
import Logging
import Metrics
import Prometheus
import ServiceLifecycle

struct Work: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a worker: claim jobs, fetch, process, store, record.",
        discussion: """
            SIGTERM/SIGINT: stop claiming, let in-flight jobs finish within --grace, release the \
            rest to 'queued' without spending an attempt, exit 0. A second signal releases at once.

            Queues: --queue thumbnails --queue backfill=1 claims only from those queues, at most 1 \
            backfill job taking a processing slot at a time; without --queue, every queue. Paused \
            queues (halcyon pause) are never claimed from.

            Environment: HALCYON_FILE_ROOTS (comma-separated --file-root), HALCYON_ALLOW_NETWORKS \
            (comma-separated --allow-network), HALCYON_WEBHOOK_SECRET (--webhook-secret), \
            HALCYON_POLL_ONLY (--poll-only), HALCYON_STORE.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var logging: LoggingOptions
    @OptionGroup var sizeLimit: StoreSizeLimitOption

    @Option(help: "Processing slots (concurrent decode/process/encode). Default: number of cores + 1.")
    var concurrency: Int?
    @Option(help: "Concurrent downloads, separate from processing slots.")
    var fetchConcurrency: Int = 8
    @Option(
        help:
            "Jobs claimed per round trip while ≥ 90 % of recent jobs were store hits (hits take no slot). At most concurrency + fetch-concurrency turns it off."
    )
    var hitClaimBatch: Int = 250
    @Option(help: "Lease per claimed job (renewed every lease/3), 1s–1d.")
    var lease = TimeSpanArgument(.seconds(30))
    @Option(help: "How often to poll when no notification arrives, 10ms–1h.")
    var pollInterval = TimeSpanArgument(.seconds(1))
    @Flag(help: "Never LISTEN; poll only (for PgBouncer transaction pooling; also HALCYON_POLL_ONLY=1).")
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
    @Option(
        help:
            "With the supervisor: end the child (SIGKILL) when its resident memory passes this, as a contained crash, 64MiB–1PiB. Default: no ceiling."
    )
    var maxMemory: ByteSizeArgument?
    @Option(help: "Time in-flight jobs get to finish after SIGTERM, 0s–1d; then they are released.")
    var grace = TimeSpanArgument(.seconds(20))
    @Option(help: "Backoff after the first transient failure (doubles per attempt, capped at 10m, with jitter), 0s–1d.")
    var retryBase = TimeSpanArgument(.seconds(2))
    @Option(
        help:
            "Deadline of every database statement (heartbeats and rescues: at most half the lease, at least 2s), 1s–1h; past it the statement is cancelled and the connection reset."
    )
    var statementTimeout = TimeSpanArgument(.seconds(30))
    @Option(name: .customLong("file-root"), help: "A directory file:// sources may read from (repeatable; also HALCYON_FILE_ROOTS).")
    var fileRoots: [String] = []
    @Option(
        name: .customLong("allow-network"),
        help:
            "A CIDR that downloads may connect to although it is internal, e.g. 10.1.0.0/16 or 127.0.0.1 (repeatable; also HALCYON_ALLOW_NETWORKS). Default: public addresses only."
    )
    var allowNetworks: [String] = []
    @Option(
        help:
            "Retries per source for failures that can succeed later (timeouts, connection errors, 408, 429, 5xx), 0–20; a job's options.retry overrides."
    )
    var fetchRetries: Int = 2
    @Option(help: "Interval before a download retry, 0s–1h.")
    var fetchRetryInterval = TimeSpanArgument(.milliseconds(500))
    @Option(help: "How the retry interval grows: fixed, accumulated (n × interval) or exponential (with jitter).")
    var fetchRetryBackoff: RetryOptions.Backoff = .exponential
    @Option(
        help:
            "Most an attempt waits between download retries, all its sources together, 0s–1d; a retry that would wait longer is not made (the job is retried later instead, holding no slot)."
    )
    var maxRetryWait = TimeSpanArgument(.seconds(60))
    @Option(help: "Time to establish a connection, 100ms–10m.")
    var connectTimeout = TimeSpanArgument(.seconds(10))
    @Option(help: "Time for a whole download, 1s–1d.")
    var fetchTimeout = TimeSpanArgument(.seconds(60))
    @Option(help: "Largest download accepted, 1 byte–16GiB (checked against Content-Length and while streaming).")
    var maxDownloadSize = ByteSizeArgument(50 << 20)
    @Option(help: "Bytes of downloaded sources that may wait for a processing slot, 1MiB–1TiB; downloads wait while more are waiting.")
    var maxPendingBytes = ByteSizeArgument(256 << 20)
    @Option(
        help:
            "Allocations this large or larger are mapped and returned to the system when freed (glibc's M_MMAP_THRESHOLD), 0 (glibc's dynamic threshold) or 4KiB–32MiB; GLIBC_TUNABLES wins."
    )
    var mmapThreshold = ByteSizeArgument(4 << 20)
    @Option(
        help:
            "Pixel budget: most pixels any image a job holds may have, all frames together — the decoded source and every step's output (e.g. 25MP), 1–268MP. A job uses up to about 20 bytes per budgeted pixel."
    )
    var maxPixels = PixelCountArgument(100_000_000)
    @Option(
        help:
            "Deadline of a source's decode, and of each job's steps and encode, 1s–1d; past it the job fails with image.too_costly. A chain estimated to need more than 1 G pixel-taps per second of it is refused before decoding."
    )
    var maxJobTime = TimeSpanArgument(.seconds(120))
    @Option(help: "Redirects followed per download, 0–50.")
    var maxRedirects: Int = 5
    @Option(
        help:
            "Keep downloaded originals in the store and reuse them this long without a request; then revalidate (If-None-Match/If-Modified-Since, a 304 reuses them). 0 keeps none; at most 365d."
    )
    var originalsTTL = TimeSpanArgument(.seconds(0))
    @Option(
        help:
            "How often a worker sweeps the store (expired files, dangling keys, --store-size-limit); one worker at a time. 0 turns it off; else 1s–30d."
    )
    var sweepInterval = TimeSpanArgument(.seconds(600))
    @Option(help: "Serve Prometheus metrics on this port at /metrics (and /healthz). Default: off.")
    var metricsPort: Int?
    @Option(help: "Address the metrics port listens on (IPv4).")
    var metricsAddress: String = "127.0.0.1"
    @Option(help: "Also write the metrics to this file every 15 s (atomically), for node_exporter's textfile collector (name it *.prom).")
    var metricsFile: String?
    @Flag(inversion: .prefixedNo, help: "With --drain: a progress line (live on a terminal, every 10 s otherwise).")
    var progress = true
    @Option(
        name: .customLong("queue"),
        help: "Claim from this queue, optionally with at most N of its jobs in processing at once: NAME or NAME=N (repeatable). Default: every queue."
    )
    var queues: [String] = []
    @Option(
        help:
            "Downloads from one host at once, 1–1024 (per worker: N workers make N× this). A 429/503 with Retry-After also pauses the host's other downloads."
    )
    var perHostConcurrency: Int = 4
    @Option(
        help:
            "Key of the webhooks' signatures (Standard Webhooks' webhook-signature, and X-Halcyon-Signature); a whsec_<base64> secret signs with the bytes it encodes. Also HALCYON_WEBHOOK_SECRET. Without it, webhooks are not signed."
    )
    var webhookSecret: String?
    @Option(help: "Time for one webhook delivery attempt, 1s–10m.")
    var webhookTimeout = TimeSpanArgument(.seconds(10))
    @Option(help: "Delivery attempts before a webhook is given up (callback_status failed), 1–50; retries back off from 1s, doubling, to 5m.")
    var webhookAttempts: Int = 8
    @Option(help: "Delete succeeded rows this long after they finished (with each store sweep, one worker at a time), 1m–100y. Default: keep.")
    var retainSucceeded: TimeSpanArgument?
    @Option(help: "Delete failed and cancelled rows this long after they finished, 1m–100y. Default: keep.")
    var retainFailed: TimeSpanArgument?

    func validate() throws {
        try lease.check("--lease", 1...86_400)
        try pollInterval.check("--poll-interval", 0.01...3600)
        try grace.check("--grace", 0...86_400)
        try retryBase.check("--retry-base", 0...86_400)
        try statementTimeout.check("--statement-timeout", 1...3600)
        try fetchRetryInterval.check("--fetch-retry-interval", 0...3600)
        try maxRetryWait.check("--max-retry-wait", 0...86_400)
        try connectTimeout.check("--connect-timeout", 0.1...600)
        try fetchTimeout.check("--fetch-timeout", 1...86_400)
        try originalsTTL.check("--originals-ttl", 0...365 * 86_400)
        if sweepInterval.duration != .zero { try sweepInterval.check("--sweep-interval", 1...30 * 86_400) }
        try maxDownloadSize.check("--max-download-size", 1...(16 << 30))
        try maxPendingBytes.check("--max-pending-bytes", (1 << 20)...(1 << 40))
        if mmapThreshold.bytes != 0 { try mmapThreshold.check("--mmap-threshold", 4096...(32 << 20)) }
        try maxPixels.check("--max-pixels", 1...(16384 * 16384))
        try maxJobTime.check("--max-job-time", 1...86_400)
        if let maxMemory { try maxMemory.check("--max-memory", (64 << 20)...(1 << 50)) }
        if let c = concurrency, !(1...256).contains(c) { throw ValidationError("--concurrency must be 1…256") }
        guard (1...1024).contains(fetchConcurrency) else { throw ValidationError("--fetch-concurrency must be 1…1024") }
        guard (1...10_000).contains(hitClaimBatch) else { throw ValidationError("--hit-claim-batch must be 1…10000") }
        guard (0...20).contains(fetchRetries) else { throw ValidationError("--fetch-retries must be 0…20") }
        guard (0...50).contains(maxRedirects) else { throw ValidationError("--max-redirects must be 0…50") }
        for cidr in allNetworks where CIDR(cidr) == nil { throw ValidationError("--allow-network '\(cidr)' is not an address or CIDR") }
        if let p = metricsPort, !(0...65535).contains(p) { throw ValidationError("--metrics-port must be 0…65535") }
        guard (1...1024).contains(perHostConcurrency) else { throw ValidationError("--per-host-concurrency must be 1…1024") }
        try webhookTimeout.check("--webhook-timeout", 1...600)
        guard (1...50).contains(webhookAttempts) else { throw ValidationError("--webhook-attempts must be 1…50") }
        if let secret = webhookSecretValue, !(1...1024).contains(secret.utf8.count) {
            throw ValidationError("the webhook secret must have 1 to 1024 bytes")
        }
        if let secret = webhookSecretValue, !WebhookConfiguration.isValidSecret(secret) {
            throw ValidationError("a webhook secret written whsec_… must be base64 after the prefix (Standard Webhooks' form)")
        }
        for (option, value) in [("--retain-succeeded", retainSucceeded), ("--retain-failed", retainFailed)] {
            guard let value else { continue }
            try value.check(option, 60...36_500 * 86_400)
            if sweepInterval.duration == .zero { throw ValidationError("\(option) runs with the store sweep: it needs --sweep-interval above 0") }
        }
        _ = try queueSlots()
    }

    private var webhookSecretValue: String? {
        webhookSecret ?? ProcessInfo.processInfo.environment["HALCYON_WEBHOOK_SECRET"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// `--queue NAME[=N]`, checked.
    private func queueSlots() throws -> [QueueSlots] {
        var out: [QueueSlots] = []
        for entry in queues {
            let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            if let problem = QueueName.problem(parts[0]) { throw ValidationError("--queue '\(entry)': \(problem)") }
            var slots: Int?
            if parts.count == 2 {
                guard let n = Int(parts[1]), (1...256).contains(n) else {
                    throw ValidationError("--queue '\(entry)': the slots after '=' must be a number from 1 to 256")
                }
                slots = n
            }
            guard !out.contains(where: { $0.name == parts[0] }) else { throw ValidationError("--queue '\(parts[0])' is given twice") }
            out.append(QueueSlots(name: parts[0], slots: slots))
        }
        return out
    }

    private var allNetworks: [String] {
        let env = (ProcessInfo.processInfo.environment["HALCYON_ALLOW_NETWORKS"] ?? "").split(separator: ",")
        return (allowNetworks + env.map { $0.trimmingCharacters(in: .whitespaces) }).filter { !$0.isEmpty }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let conninfo = try await checkDatabase(logger)
        let channel = SupervisorChannel.fromEnvironment()
        if supervise, channel == nil {
            return try await runSupervisor(conninfo: conninfo, logger: logger)
        }
        var configuration = workerConfiguration()
        if let channel {
            configuration.supervisor = channel
            configuration.restarts = ProcessInfo.processInfo.environment[Supervisor.restartsKey].flatMap { Int($0) } ?? 0
            // Reports to a supervisor that is gone fail with EPIPE, not a signal.
            signal(SIGPIPE, SIG_IGN)
        }

        // Every metric goes to one Prometheus registry, published by the exporter.
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(Metrics.prometheusFactory(registry: registry))
        let exporter = try MetricsExporter(registry: registry, port: metricsPort, address: metricsAddress, file: metricsFile, logger: logger)
        let worker = Worker(configuration: configuration, conninfo: conninfo, logger: logger)
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
        let signals = SignalForwarder(signals: channel == nil ? [SIGTERM, SIGINT] : [Supervisor.stopSignal]) { worker.requestStop() }
        defer { signals.cancel() }
        // A supervised process whose supervisor died stops as if told to (it is reparented).
        let orphanWatch = channel.map { _ in
            let parent = getppid()
            return Task.detached {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(500))
                    if getppid() != parent {
                        worker.requestStop()
                        return
                    }
                }
            }
        }
        defer { orphanWatch?.cancel() }
        let progressLine = drain && progress ? ProgressReporter(conninfo: conninfo) : nil
        // The exporter first, so it is shut down last: its final write has the worker's totals.
        // The worker starts once the metrics endpoint listens: a port in use ends the command
        // before a job is claimed.
        try await ServiceGroup(
            configuration: .init(
                services: [
                    .init(service: exporter),
                    .init(
                        service: StartingAfter(worker) { _ = try await exporter.listening() }, successTerminationBehavior: .gracefullyShutdownGroup),
                ], logger: logger)
        ).run()
        await progressLine?.finish()
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

    /// The worker's configuration from the options.
    private func workerConfiguration() -> WorkerConfiguration {
        var configuration = WorkerConfiguration(storeRoot: storeOptions.root(), workerID: workerID, concurrency: concurrency)
        configuration.fetchConcurrency = fetchConcurrency
        configuration.hitClaimBatch = hitClaimBatch
        configuration.lease = lease.duration
        configuration.pollInterval = pollInterval.duration
        configuration.pollOnly = pollOnly || PollOnlyEnvironment.isSet
        configuration.drain = drain
        configuration.grace = grace.duration
        configuration.backoff.base = retryBase.seconds
        configuration.statementTimeout = statementTimeout.duration
        configuration.maxPendingBytes = maxPendingBytes.bytes
        configuration.mmapThreshold = mmapThreshold.bytes
        configuration.limits.maxPixels = maxPixels.pixels
        configuration.limits.maxJobTime = maxJobTime.duration
        configuration.sweepInterval = sweepInterval.duration
        configuration.storeSizeLimit = sizeLimit.bytes
        configuration.queues = (try? queueSlots()) ?? []
        configuration.webhooks.secret = webhookSecretValue
        configuration.webhooks.timeout = webhookTimeout.duration
        configuration.webhooks.maxAttempts = webhookAttempts
        configuration.retainSucceeded = retainSucceeded?.duration
        configuration.retainFailed = retainFailed?.duration
        var fetch = configuration.fetch
        let environmentRoots = (ProcessInfo.processInfo.environment["HALCYON_FILE_ROOTS"] ?? "").split(separator: ",").map(String.init)
        fetch.fileRoots = (fileRoots + environmentRoots).filter { !$0.isEmpty }
        fetch.addressPolicy = AddressPolicy(allowed: allNetworks.compactMap(CIDR.init))
        fetch.retry = DelayRetryStrategy(RetryOptions(max: fetchRetries, interval: fetchRetryInterval.seconds, backoff: fetchRetryBackoff))
        fetch.maxRetryWait = maxRetryWait.seconds
        fetch.connectTimeout = connectTimeout.seconds
        fetch.totalTimeout = fetchTimeout.seconds
        fetch.maxBytes = maxDownloadSize.bytes
        fetch.maxRedirects = maxRedirects
        fetch.perHostConcurrency = perHostConcurrency
        fetch.originalsTTL = originalsTTL.seconds
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
private struct StartingAfter<Wrapped: Service>: Service {
    let service: Wrapped
    let ready: @Sendable () async throws -> Void

    init(_ service: Wrapped, ready: @escaping @Sendable () async throws -> Void) {
        self.service = service
        self.ready = ready
    }

    func run() async throws {
        try await ready()
        try await service.run()
    }
}
