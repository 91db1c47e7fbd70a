import Foundation
import HalcyonDomain
import HalcyonFetch
import HalcyonImage
import HalcyonQueue
import HalcyonRuntime
import HalcyonS3
import HalcyonStore
import HalcyonTracing

/// Everything a worker needs to know, with the defaults `halcyon work` documents.
public struct WorkerConfiguration: Sendable {
    /// Unique per process. Default `<host>-<pid>-<random>`: a pid alone repeats across
    /// containers (pid 1 in every one sharing `--network host`).
    public var workerID: String
    /// Processing slots (concurrent decode/encode). Default: the number of cores plus one —
    /// with one slot per core, the hand-off from one job to the next (a slot released, the
    /// next job's task resumed on the cooperative pool, its work handed to a processing thread)
    /// left the cores idle about a fifth of the time in W1 (README, Benchmark).
    public var concurrency: Int
    /// Concurrent downloads, separate from processing. Default: `Settings.fetchConcurrency`.
    public var fetchConcurrency: Int = Settings.fetchConcurrency.defaultValue
    /// Jobs claimed per round trip while ≥ 90 % of recent jobs were store hits. Default:
    /// `Settings.hitClaimBatch`; at most concurrency + fetchConcurrency turns the larger claims off.
    public var hitClaimBatch: Int = Settings.hitClaimBatch.defaultValue
    /// How long a claim is leased for; renewed every lease/3. Default: `Settings.lease`.
    public var lease: Duration = Settings.lease.defaultValue
    /// Between polls when no notification arrives. Default: `Settings.pollInterval`.
    public var pollInterval: Duration = Settings.pollInterval.defaultValue
    /// Poll only, no LISTEN (for PgBouncer transaction pooling). Default false.
    public var pollOnly = false
    /// Exit once nothing is runnable now and nothing is running. Default false.
    public var drain = false
    /// What in-flight jobs get to finish after SIGTERM before they are released. Default:
    /// `Settings.grace`.
    public var grace: Duration = Settings.grace.defaultValue
    /// Deadline of every database statement (heartbeats and rescues: at most half the lease,
    /// at least 2 s). Past it the statement is cancelled and its connection reset. Default:
    /// `Settings.statementTimeout`.
    public var statementTimeout: Duration = Settings.statementTimeout.defaultValue
    /// Bytes of sources held in memory — arriving, or downloaded and waiting for (or in) a
    /// processing slot: a download starts only while fewer are held, and one under way is held
    /// back at its next chunk while more are (except one that is moving; the bytes of downloads
    /// that stopped moving count against no one up to as much again: `PendingBytes`).
    /// `pendingBytes(maxMemory:)` gives the default.
    public var maxPendingBytes: Int = Settings.maxPendingBytes.defaultValue

    /// The pending-bytes budget when none is given: `Settings.maxPendingBytes`' default, or a
    /// quarter of the memory ceiling (`--max-memory`) when that is less — downloads spend the
    /// memory the ceiling guards.
    public static func pendingBytes(maxMemory: Int?) -> Int {
        let standard = Settings.maxPendingBytes.defaultValue
        guard let maxMemory, maxMemory > 0 else { return standard }
        return min(standard, max(Settings.maxPendingBytes.range.lowerBound, maxMemory / 4))
    }
    /// glibc's mmap threshold for the process: allocations this large or larger (source bytes,
    /// ImageMagick pixel caches) are mapped and given back to the system when freed. Default:
    /// `Settings.mmapThreshold` (which also says what `halcyon work` takes); 0 leaves glibc's
    /// dynamic threshold, which rises to the largest block freed (up to 32 MiB) and keeps such
    /// blocks in the heap, where they fragment it: W1's peak RSS was 164 MB that way and 133 MB
    /// with 4 MiB, at the same speed.
    /// A `GLIBC_TUNABLES` setting of `glibc.malloc.mmap_threshold` wins over this.
    public var mmapThreshold: Int = Settings.mmapThreshold.defaultValue
    /// Between sweeps for expired leases. Nil (default): `effectiveRescueInterval`'s, a third of
    /// the lease within bounds.
    public var rescueInterval: Duration?
    /// Backoff of transiently failed jobs (its base is `--retry-base`). Default: `defaultBackoff`.
    public var backoff = WorkerConfiguration.defaultBackoff
    /// A transiently failed job's retries unless told otherwise: 2 s (`--retry-base`'s default),
    /// doubling per attempt, at most 10 minutes, shortened by up to a quarter (`retryJitter`).
    public static let defaultBackoff = Backoff(base: .seconds(2), maximum: .minutes(10), jitter: retryJitter)
    /// The jitter of the worker's retries (a job's, and its store checks'): each wait shortened by
    /// up to a quarter, so that a fleet's failures at one moment do not come back in lockstep.
    public static let retryJitter = Backoff.Jitter.fraction(0.25)
    public var fetch = FetchConfiguration()
    public var limits = ImageLimits()
    /// Where results are kept: a directory or an S3 bucket (`--store`).
    public var store: StoreLocation
    /// Between store sweeps (one worker at a time sweeps); zero turns them off. Default:
    /// `Settings.sweepInterval`.
    public var sweepInterval: Duration = Settings.sweepInterval.defaultValue
    /// Bytes the store may hold before sweeps trim it to half by least recent access; nil for
    /// no limit (the default).
    public var storeSizeLimit: Int64?
    /// A disk store: claiming pauses while its filesystem has fewer free bytes than this (at most
    /// a twentieth of the filesystem's size); 0 turns it off. Default: `Settings.storeMinFree`.
    public var storeMinFree: Int = Settings.storeMinFree.defaultValue
    /// The queues this worker claims from, each optionally with a limit on how many of its jobs
    /// take processing slots at once. Empty (the default): every queue, no per-queue limit.
    public var queues: [QueueSlots] = []
    /// Webhook delivery (`options.callback_url`).
    public var webhooks = WebhookConfiguration()
    /// Span export (OpenTelemetry, OTLP/HTTP); off unless an endpoint is set.
    public var tracing = TracingConfiguration()
    /// Rows retention, run with the store sweep (every `sweepInterval`, one worker at a time):
    /// succeeded rows finished longer ago than this are deleted. Nil (default): kept.
    public var retainSucceeded: Duration?
    /// The same for failed and cancelled rows. Nil (default): kept.
    public var retainFailed: Duration?
    /// Hours of usage per queue and fair key (`halcyon.usage`) are deleted this long after they
    /// ended, by the usage roll-up. Default: `Settings.retainUsage`.
    public var retainUsage: Duration = Settings.retainUsage.defaultValue
    /// Between usage roll-ups (one worker at a time moves the usage events into their hours).
    /// Default 1 min; not an option of `halcyon work`.
    public var usageInterval: Duration = .seconds(60)
    /// How often the queues with fleet-wide limits are read into the metrics (`Metrics.queues`):
    /// `halcyon work` sets `MetricsExporter.fileInterval` when it exports metrics. Nil (default): not read.
    public var queueMetricsInterval: Duration?
    /// The supervisor's pipe, when this worker runs as the child of `Supervisor`: the jobs
    /// entering and leaving processing are reported on it. Nil (default): unsupervised.
    public var supervisor: SupervisorChannel?
    /// Restarts of the supervised process before this one (a metric); 0 unless supervised.
    public var restarts = 0

    public init(store: StoreLocation, workerID: String? = nil, concurrency: Int? = nil) {
        self.store = store
        self.workerID = workerID ?? Self.defaultWorkerID()
        self.concurrency = concurrency ?? Self.defaultConcurrency
    }

    /// A worker whose store is the directory `storeRoot`.
    public init(storeRoot: URL, workerID: String? = nil, concurrency: Int? = nil) {
        self.init(store: .directory(storeRoot), workerID: workerID, concurrency: concurrency)
    }

    /// The settings `halcyon work` exposes, each with its option, default, accepted values and
    /// meaning; the properties above default to them and `validate()` checks them.
    public enum Settings {
        public static let concurrency = Setting.count(
            "--concurrency", default: WorkerConfiguration.defaultConcurrency, 1...256, "Processing slots (concurrent decode/process/encode)",
            detail: "Default: number of cores + 1.")
        public static let fetchConcurrency = Setting.count(
            "--fetch-concurrency", default: 8, 1...1024, "Concurrent downloads, separate from processing slots")
        public static let hitClaimBatch = Setting.count(
            "--hit-claim-batch", default: 250, 1...10_000,
            "Jobs claimed per round trip while ≥ 90 % of recent jobs were store hits (hits take no slot)",
            detail: "At most concurrency + fetch-concurrency turns it off.")
        public static let lease = Setting.duration(
            "--lease", default: .seconds(30), .seconds(1)...(.days(1)), "Lease per claimed job (renewed every lease/3)")
        public static let pollInterval = Setting.duration(
            "--poll-interval", default: .seconds(1), .milliseconds(10)...(.hours(1)), "How often to poll when no notification arrives")
        public static let grace = Setting.duration(
            "--grace", default: .seconds(20), .zero...(.days(1)), "Time in-flight jobs get to finish after SIGTERM",
            detail: "Then they are released.")
        public static let retryBase = Setting.duration(
            "--retry-base", default: defaultBackoff.base, .zero...(.days(1)),
            "Backoff after the first transient failure (doubles per attempt, capped at \(TimeSpan.format(defaultBackoff.maximum ?? .zero)), with jitter)"
        )
        public static let statementTimeout = Setting.duration(
            "--statement-timeout", default: .seconds(30), .seconds(1)...(.hours(1)),
            "Deadline of every database statement (heartbeats and rescues: at most half the lease, at least 2s)",
            detail: "Past it the statement is cancelled and the connection reset.")
        public static let maxPendingBytes = Setting.bytes(
            "--max-pending-bytes", default: standardPendingBytes, (1 << 20)...(1 << 40),
            "Bytes of sources held in memory, arriving or waiting for a processing slot",
            detail: "Downloads wait (and slow down) while more are held. Default: \(ByteSize.formatExact(standardPendingBytes)), "
                + "or a quarter of --max-memory when that is less.")
        /// `--max-pending-bytes`' default without `--max-memory` (its help states it).
        private static let standardPendingBytes = 256 << 20
        public static let mmapThreshold = Setting.bytes(
            "--mmap-threshold", default: 4 << 20, 4096...(32 << 20), off: 0,
            "Allocations this large or larger are mapped and returned to the system when freed (glibc's M_MMAP_THRESHOLD)",
            detail: "Off leaves glibc's dynamic threshold; GLIBC_TUNABLES wins.")
        public static let sweepInterval = Setting.duration(
            "--sweep-interval", default: .seconds(600), .seconds(1)...(.days(30)), off: .zero,
            "How often a worker sweeps the store (expired files, dangling keys, --store-size-limit); one worker at a time")
        public static let storeMinFree = Setting.bytes(
            "--store-min-free", default: 64 << 20, 4096...(1 << 50), off: 0,
            "A disk store: pause claiming while its filesystem has less free space than this (never more than a twentieth of the filesystem)",
            detail: "Claiming resumes by itself once there is.")
        public static let retainSucceeded = Setting.duration(
            "--retain-succeeded", default: .zero, .minutes(1)...(.days(36_500)),
            "Delete succeeded rows this long after they finished (with each store sweep, one worker at a time)", detail: "Default: keep.")
        public static let retainFailed = Setting.duration(
            "--retain-failed", default: .zero, .minutes(1)...(.days(36_500)), "Delete failed and cancelled rows this long after they finished",
            detail: "Default: keep.")
        public static let retainUsage = Setting.duration(
            "--retain-usage", default: .days(400), .days(1)...(.days(3650)),
            "Delete hours of usage per queue and fair key (halcyon usage) this long after they ended (with the usage roll-up, every minute, one worker at a time)"
        )
        /// What `--queue NAME=N` accepts after the `=`.
        public static let queueSlots = 1...256

        /// Why `--queue entry` is refused when its slots are not a number in `queueSlots`.
        public static func queueSlotsProblem(_ entry: String) -> String {
            "--queue '\(entry)': the slots after '=' must be a number from \(queueSlots.lowerBound) to \(queueSlots.upperBound)"
        }
    }

    /// Checks every setting and what the settings must agree on (`job.invalid_options`, naming
    /// the option). `Worker.run()` calls it: a program that builds a configuration gets the same
    /// checks as the command line.
    public func validate() throws(HalcyonError) {
        try Settings.concurrency.check(concurrency)
        try Settings.fetchConcurrency.check(fetchConcurrency)
        try Settings.hitClaimBatch.check(hitClaimBatch)
        try Settings.lease.check(lease)
        try Settings.pollInterval.check(pollInterval)
        try Settings.grace.check(grace)
        try Settings.retryBase.check(backoff.base)
        try Settings.statementTimeout.check(statementTimeout)
        try Settings.maxPendingBytes.check(maxPendingBytes)
        try Settings.mmapThreshold.check(mmapThreshold)
        try Settings.sweepInterval.check(sweepInterval)
        try Settings.storeMinFree.check(storeMinFree)
        try Settings.retainSucceeded.check(retainSucceeded)
        try Settings.retainFailed.check(retainFailed)
        try Settings.retainUsage.check(retainUsage)
        try tracing.validate()
        if usageInterval <= .zero { throw HalcyonError(.invalidOptions, "the usage roll-up interval must be positive") }
        if let interval = queueMetricsInterval, interval <= .zero {
            throw HalcyonError(.invalidOptions, "the queue metrics interval must be positive")
        }
        for (setting, value) in [(Settings.retainSucceeded, retainSucceeded), (Settings.retainFailed, retainFailed)] where value != nil {
            if sweepInterval == .zero {
                throw HalcyonError(.invalidOptions, "\(setting.option) runs with the store sweep: it needs --sweep-interval above 0")
            }
        }
        var names: Set<String> = []
        for queue in queues {
            if let problem = QueueName.problem(queue.name) { throw HalcyonError(.invalidOptions, "--queue '\(queue.name)': \(problem)") }
            if let slots = queue.slots, !Settings.queueSlots.contains(slots) {
                throw HalcyonError(.invalidOptions, Settings.queueSlotsProblem(queue.name))
            }
            guard names.insert(queue.name).inserted else { throw HalcyonError(.invalidOptions, "--queue '\(queue.name)' is given twice") }
        }
        if let storeSizeLimit, storeSizeLimit < 1 { throw HalcyonError(.invalidOptions, "--store-size-limit must be positive") }
        if case .objectStore(let s3) = store { try s3.validate() }
        try fetch.validate()
        try limits.validate()
        try webhooks.validate()
        if let problem = MagickImage.policyProblem { throw HalcyonError(.invalidOptions, problem) }
    }

    /// The cores plus one.
    public static var defaultConcurrency: Int { ProcessInfo.processInfo.activeProcessorCount + 1 }

    public static func defaultWorkerID() -> String {
        let tag = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        return "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(tag)"
    }

    /// The deadline of heartbeat and rescue statements: a slow one should end before the
    /// leases it renews do (and a loaded server gets at least 2 s).
    var maintenanceStatementTimeout: Duration { min(statementTimeout, max(.seconds(2), lease / 2)) }

    /// How often leases are renewed: three times per lease.
    var heartbeatInterval: Duration { lease / 3 }

    /// Jobs held at once: every processing slot busy plus every download slot busy.
    var maxInFlight: Int { concurrency + fetchConcurrency }

    /// The free places (of `limit`, with `occupying` taken) a claim waits for: half of a hit
    /// claim; for misses one while no more jobs are in hand than processing slots, else half
    /// of the places beyond them (so claims fetch several jobs while the slots have work).
    static func claimThreshold(hits: Bool, limit: Int, occupying: Int, concurrency: Int) -> Int {
        if hits { return max(1, limit / 2) }
        return occupying <= concurrency ? 1 : max(1, (limit - concurrency) / 2)
    }

    /// Jobs claimed at once while nearly every recent job was a store hit (`hitClaimRatio`):
    /// hits take no slot and finish in well under a millisecond, so one round trip claims many.
    var maxInFlightForHits: Int { max(maxInFlight, hitClaimBatch) }
    /// The share of recent outcomes (an exponential average over about ten jobs) that must be
    /// store hits for the larger claims.
    static let hitClaimRatio = 0.9

    var effectiveRescueInterval: Duration { rescueInterval ?? max(.milliseconds(500), min(.seconds(5), lease / 3)) }
}

/// A queue a worker claims from, and at most how many of its jobs may take processing slots
/// at once in this worker (`--queue backfill=1`); nil: as many as there are slots.
public struct QueueSlots: Sendable, Equatable {
    public var name: String
    public var slots: Int?

    public init(name: String, slots: Int? = nil) {
        self.name = name
        self.slots = slots
    }
}

/// How webhooks are delivered. Defaults as `halcyon work` documents them. Its secrets are never
/// shown: `description` and its mirror (what `dump` and reflection print) say only how many
/// there are.
public struct WebhookConfiguration: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Keys of the signatures, in order: each signs `webhook-signature` (Standard Webhooks: one
    /// `v1,…` per secret, so a receiver holding either the old or the new key verifies during a
    /// rotation); the first also signs `X-Halcyon-Signature: sha256=<hex HMAC-SHA256 of the
    /// body>`. Empty: deliveries are not signed.
    public var secrets: [String] = []

    /// Most secrets at once (a rotation needs two).
    public static let maxSecrets = 4
    /// Bytes of one secret.
    public static let secretBytes = 1...1024

    /// Why `secret` cannot sign, or nil: its bytes must be in `secretBytes`, and one written
    /// `whsec_…` must be base64 after the prefix.
    public static func secretProblem(_ secret: String) -> String? {
        guard secretBytes.contains(secret.utf8.count) else {
            return "a webhook secret must have \(secretBytes.lowerBound) to \(secretBytes.upperBound) bytes"
        }
        guard WebhookSignature(secrets: [secret]) != nil else {
            return "a webhook secret written whsec_… must be base64 after the prefix (Standard Webhooks' form)"
        }
        return nil
    }
    /// Time for one delivery attempt, connection included. Default: `Settings.timeout`.
    public var timeout: Duration = Settings.timeout.defaultValue
    /// Attempts before a delivery is given up (`callback_status = 'failed'`). Default:
    /// `Settings.maxAttempts`.
    public var maxAttempts = Settings.maxAttempts.defaultValue

    /// The webhook settings `halcyon work` and `halcyon deliver` expose.
    public enum Settings {
        public static let timeout = Setting.duration(
            "--webhook-timeout", default: .seconds(10), .seconds(1)...(.minutes(10)), "Time for one webhook delivery attempt")
        public static let maxAttempts = Setting.count(
            "--webhook-attempts", default: 8, 1...50, "Delivery attempts before a webhook is given up (callback_status failed)",
            detail: "Retries back off from \(TimeSpan.format(defaultRetryBase)), doubling, to \(TimeSpan.format(defaultMaxRetryDelay)) "
                + "(longer when the receiver's Retry-After asks, up to \(TimeSpan.format(defaultMaxRetryDelay))).")
    }
    /// Wait before the second attempt; doubles per attempt up to `maxRetryDelay`. Default:
    /// `defaultRetryBase`.
    public var retryBase: Duration = Self.defaultRetryBase
    /// Longest wait between attempts, and the most a receiver's `Retry-After` is honoured.
    /// Default: `defaultMaxRetryDelay`.
    public var maxRetryDelay: Duration = Self.defaultMaxRetryDelay
    /// The retry delays' defaults, which `--webhook-attempts`' help states.
    public static let defaultRetryBase: Duration = .seconds(1)
    public static let defaultMaxRetryDelay: Duration = .seconds(300)
    /// Deliveries in flight at once per worker.
    public var concurrency = 8
    /// Deliveries in flight at once to one host, per worker.
    public var perHostConcurrency = 2
    /// Failed attempts in a row to one host (timeouts, connection errors, 5xx, 408, 429) after
    /// which a worker stops sending it deliveries for `breakerCooldown` (its circuit opens).
    public var breakerThreshold = 5
    /// How long an open circuit stays open before one delivery probes the host; each failed
    /// probe doubles it, up to `maxRetryDelay`.
    public var breakerCooldown: Duration = .seconds(30)

    /// Checks the values a command line or a program may set (`job.invalid_options` when not).
    public func validate() throws(HalcyonError) {
        func check(_ ok: Bool, _ message: @autoclosure () -> String) throws(HalcyonError) {
            if !ok { throw HalcyonError(.invalidOptions, message()) }
        }
        try check(secrets.count <= Self.maxSecrets, "--webhook-secret: at most \(Self.maxSecrets) secrets (a rotation needs two)")
        for secret in secrets {
            if let problem = Self.secretProblem(secret) { throw HalcyonError(.invalidOptions, "--webhook-secret: \(problem)") }
        }
        try Settings.timeout.check(timeout)
        try Settings.maxAttempts.check(maxAttempts)
        try check(concurrency >= 1 && perHostConcurrency >= 1 && breakerThreshold >= 1, "webhook concurrency and breaker threshold must be positive")
        try check(retryBase > .zero && maxRetryDelay >= retryBase && breakerCooldown > .zero, "webhook delays must be positive")
    }

    public init() {}

    public var description: String {
        "WebhookConfiguration(secrets: \(secrets.count) redacted, timeout: \(TimeSpan.format(timeout)), attempts: \(maxAttempts))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "secrets": "\(secrets.count) redacted", "timeout": timeout, "maxAttempts": maxAttempts, "retryBase": retryBase,
                "maxRetryDelay": maxRetryDelay, "concurrency": concurrency, "perHostConcurrency": perHostConcurrency,
                "breakerThreshold": breakerThreshold, "breakerCooldown": breakerCooldown,
            ])
    }

    /// The waits between a delivery's attempts: `retryBase` doubling per attempt, capped at
    /// `maxRetryDelay`, without jitter.
    public var retryBackoff: Backoff { Backoff(base: retryBase, maximum: maxRetryDelay) }

    /// The wait after failed attempt `attempt` (1-based): `retryBackoff`'s; longer when the
    /// receiver asked for more (`Retry-After`, in seconds), up to the same cap.
    public func retryDelay(afterAttempt attempt: Int, retryAfter: Double? = nil) -> Duration {
        retryBackoff.delay(afterAttempt: attempt, random: 0, retryAfter: Backoff.retryAfter(seconds: retryAfter))
    }
}
