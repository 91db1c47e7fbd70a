import ArgumentParser
import Dispatch
import Foundation
import HalcyonCore
import HalcyonFetch
import HalcyonQueue
import HalcyonWorker
import Logging

struct Work: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a worker: claim jobs, fetch, process, store, record.",
        discussion: """
            SIGTERM/SIGINT: stop claiming, let in-flight jobs finish within --grace, release the
            rest to 'queued' without spending an attempt, exit 0. A second signal releases at once.
            Environment: HALCYON_FILE_ROOTS (comma-separated --file-root), HALCYON_ALLOW_NETWORKS
            (comma-separated --allow-network), HALCYON_STORE.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var logging: LoggingOptions
    @OptionGroup var sizeLimit: StoreSizeLimitOption

    @Option(help: "Processing slots (concurrent decode/process/encode). Default: number of cores.")
    var concurrency: Int?
    @Option(help: "Concurrent downloads, separate from processing slots.")
    var fetchConcurrency: Int = 8
    @Option(help: "Jobs claimed per round trip while ≥ 90 % of recent jobs were store hits (hits take no slot). At most concurrency + fetch-concurrency turns it off.")
    var hitClaimBatch: Int = 250
    @Option(help: "Lease per claimed job (renewed every lease/3), e.g. 30s.")
    var lease: String = "30s"
    @Option(help: "How often to poll when no notification arrives, e.g. 1s.")
    var pollInterval: String = "1s"
    @Flag(help: "Never LISTEN; poll only (for PgBouncer transaction pooling).")
    var pollOnly = false
    @Flag(help: "Exit when no job is runnable now and none is running (jobs scheduled for later stay).")
    var drain = false
    @Option(help: "Worker id (default <host>-<pid>).")
    var workerID: String?
    @Option(help: "Time in-flight jobs get to finish after SIGTERM, e.g. 20s.")
    var grace: String = "20s"
    @Option(help: "Backoff after the first transient failure (doubles per attempt, capped at 10m, with jitter).")
    var retryBase: String = "2s"
    @Option(name: .customLong("file-root"), help: "A directory file:// sources may read from (repeatable; also HALCYON_FILE_ROOTS).")
    var fileRoots: [String] = []
    @Option(name: .customLong("allow-network"), help: "A CIDR that downloads may connect to although it is internal, e.g. 10.1.0.0/16 or 127.0.0.1 (repeatable; also HALCYON_ALLOW_NETWORKS). Default: public addresses only.")
    var allowNetworks: [String] = []
    @Option(help: "Retries per source for failures that can succeed later (timeouts, connection errors, 408, 429, 5xx); a job's options.retry overrides.")
    var fetchRetries: Int = 2
    @Option(help: "Interval before a download retry.")
    var fetchRetryInterval: String = "500ms"
    @Option(help: "How the retry interval grows: fixed, accumulated (n × interval) or exponential (with jitter).")
    var fetchRetryBackoff: String = "exponential"
    @Option(help: "Time to establish a connection.")
    var connectTimeout: String = "10s"
    @Option(help: "Time for a whole download.")
    var fetchTimeout: String = "60s"
    @Option(help: "Largest download accepted, e.g. 50MiB (checked against Content-Length and while streaming).")
    var maxDownloadSize: String = "50MiB"
    @Option(help: "Redirects followed per download.")
    var maxRedirects: Int = 5
    @Option(help: "Keep downloaded originals in the store and reuse them this long without a request; then revalidate (If-None-Match/If-Modified-Since, a 304 reuses them). 0 keeps none.")
    var originalsTTL: String = "0s"
    @Option(help: "How often a worker sweeps the store (expired files, dangling keys, --store-size-limit); one worker at a time. 0 turns it off.")
    var sweepInterval: String = "10m"
    @Option(help: "Serve Prometheus metrics on this port at /metrics (and /healthz). Default: off.")
    var metricsPort: Int?
    @Option(help: "Address the metrics port listens on (IPv4).")
    var metricsAddress: String = "127.0.0.1"
    @Option(help: "Also write the metrics to this file every 15 s (atomically), for node_exporter's textfile collector (name it *.prom).")
    var metricsFile: String?
    @Flag(inversion: .prefixedNo, help: "With --drain: a progress line (live on a terminal, every 10 s otherwise).")
    var progress = true

    func validate() throws {
        for (name, value) in [("--lease", lease), ("--poll-interval", pollInterval), ("--grace", grace), ("--retry-base", retryBase),
                              ("--fetch-retry-interval", fetchRetryInterval), ("--connect-timeout", connectTimeout), ("--fetch-timeout", fetchTimeout),
                              ("--originals-ttl", originalsTTL), ("--sweep-interval", sweepInterval)] {
            guard TimeSpan.parse(value) != nil else { throw ValidationError("\(name) must be a duration like 30s, 500ms or 2m") }
        }
        guard (TimeSpan.parse(lease) ?? 0) >= 1 else { throw ValidationError("--lease must be at least 1s") }
        if let c = concurrency, !(1...256).contains(c) { throw ValidationError("--concurrency must be 1…256") }
        guard (1...1024).contains(fetchConcurrency) else { throw ValidationError("--fetch-concurrency must be 1…1024") }
        guard (1...10_000).contains(hitClaimBatch) else { throw ValidationError("--hit-claim-batch must be 1…10000") }
        guard (0...20).contains(fetchRetries) else { throw ValidationError("--fetch-retries must be 0…20") }
        guard RetryOptions.Backoff(rawValue: fetchRetryBackoff) != nil else { throw ValidationError("--fetch-retry-backoff must be fixed, accumulated or exponential") }
        guard ByteSize.parse(maxDownloadSize).map({ $0 > 0 }) == true else { throw ValidationError("--max-download-size must be a size like 50MiB") }
        guard (0...50).contains(maxRedirects) else { throw ValidationError("--max-redirects must be 0…50") }
        for cidr in allNetworks where CIDR(cidr) == nil { throw ValidationError("--allow-network '\(cidr)' is not an address or CIDR") }
        if let p = metricsPort, !(0...65535).contains(p) { throw ValidationError("--metrics-port must be 0…65535") }
    }

    private var allNetworks: [String] {
        let env = (ProcessInfo.processInfo.environment["HALCYON_ALLOW_NETWORKS"] ?? "").split(separator: ",")
        return (allowNetworks + env.map { $0.trimmingCharacters(in: .whitespaces) }).filter { !$0.isEmpty }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let conninfo = try await checkDatabase(logger)

        var c = WorkerConfiguration(storeRoot: storeOptions.root(), workerID: workerID, concurrency: concurrency)
        c.fetchConcurrency = fetchConcurrency
        c.hitClaimBatch = hitClaimBatch
        c.lease = TimeSpan.parse(lease)!
        c.pollInterval = TimeSpan.parse(pollInterval)!
        c.pollOnly = pollOnly
        c.drain = drain
        c.grace = TimeSpan.parse(grace)!
        c.backoff.base = TimeSpan.parse(retryBase)!
        let envRoots = (ProcessInfo.processInfo.environment["HALCYON_FILE_ROOTS"] ?? "").split(separator: ",").map(String.init)
        c.fetch.fileRoots = (fileRoots + envRoots).filter { !$0.isEmpty }
        c.fetch.addressPolicy = AddressPolicy(allowed: allNetworks.compactMap(CIDR.init))
        c.fetch.retry = DelayRetryStrategy(RetryOptions(max: fetchRetries, interval: TimeSpan.parse(fetchRetryInterval)!,
                                                        backoff: RetryOptions.Backoff(rawValue: fetchRetryBackoff)!))
        c.fetch.connectTimeout = TimeSpan.parse(connectTimeout)!
        c.fetch.totalTimeout = TimeSpan.parse(fetchTimeout)!
        c.fetch.maxBytes = ByteSize.parse(maxDownloadSize)!
        c.fetch.maxRedirects = maxRedirects
        c.fetch.originalsTTL = TimeSpan.parse(originalsTTL)!
        c.sweepInterval = TimeSpan.parse(sweepInterval)!
        c.storeSizeLimit = sizeLimit.bytes

        let worker = Worker(configuration: c, conninfo: conninfo, logger: logger)
        // Over a file-size limit (RLIMIT_FSIZE) a write should fail with EFBIG — a job's
        // store.write_failed — not kill the worker with SIGXFSZ.
        signal(SIGXFSZ, SIG_IGN)
        let signals = SignalForwarder(signals: [SIGTERM, SIGINT]) { worker.requestStop() }
        let exporter = try MetricsExporter(worker: worker, port: metricsPort, address: metricsAddress, file: metricsFile, logger: logger)
        let progressLine = drain && progress ? ProgressReporter(conninfo: conninfo) : nil
        _ = try await worker.run()
        await progressLine?.finish()
        exporter.finish()
        signals.cancel()
    }
}

extension Work {
    /// Connects once to check the schema. A database that is down or dropping connections
    /// (restarting, failing over) is retried with backoff for up to a minute — a worker started
    /// beside its database should wait for it; anything else (a bad URL, a missing schema)
    /// fails at once.
    func checkDatabase(_ logger: Logger) async throws -> String {
        let deadline = Date().addingTimeInterval(60)
        var delay = 0.1
        while true {
            do {
                let (connection, conninfo) = try await database.connect()
                await connection.close()
                return conninfo
            } catch let error as DatabaseError where error.connectionLost && Date() < deadline {
                logger.warning("database unavailable at start; retrying", metadata: ["error": "\(error)", "retry_in": "\(TimeSpan.format(delay))"])
                try await Task.sleep(for: .seconds(delay))
                delay = min(delay * 2, 5)
            }
        }
    }
}
