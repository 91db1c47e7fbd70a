import Foundation
import HalcyonCore
import HalcyonFetch
import HalcyonImage
import HalcyonQueue

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
    /// Concurrent downloads, separate from processing. Default 8.
    public var fetchConcurrency: Int = 8
    /// Jobs claimed per round trip while ≥ 90 % of recent jobs were store hits. Default 250;
    /// at most concurrency + fetchConcurrency turns the larger claims off.
    public var hitClaimBatch: Int = 250
    /// How long a claim is leased for; renewed every lease/3. Default 30 s.
    public var lease: Duration = .seconds(30)
    /// Between polls when no notification arrives. Default 1 s.
    public var pollInterval: Duration = .seconds(1)
    /// Poll only, no LISTEN (for PgBouncer transaction pooling). Default false.
    public var pollOnly = false
    /// Exit once nothing is runnable now and nothing is running. Default false.
    public var drain = false
    /// What in-flight jobs get to finish after SIGTERM before they are released. Default 20 s.
    public var grace: Duration = .seconds(20)
    /// Deadline of every database statement (heartbeats and rescues: at most half the lease,
    /// at least 2 s). Past it the statement is cancelled and its connection reset. Default 30 s.
    public var statementTimeout: Duration = .seconds(30)
    /// Bytes of downloaded sources that may wait for a processing slot; a download starts only
    /// while fewer are waiting. Default 256 MiB. (Downloads in progress add at most
    /// fetchConcurrency × the download limit.)
    public var maxPendingBytes: Int = 256 << 20
    /// glibc's mmap threshold for the process: allocations this large or larger (source bytes,
    /// ImageMagick pixel caches) are mapped and given back to the system when freed. Default
    /// 4 MiB; 0 leaves glibc's dynamic threshold, which rises to the largest block freed (up to
    /// 32 MiB) and keeps such blocks in the heap, where they fragment it: W1's peak RSS was
    /// 164 MB that way and 133 MB with 4 MiB, at the same speed (`halcyon work` takes 4 KiB–32 MiB).
    /// A `GLIBC_TUNABLES` setting of `glibc.malloc.mmap_threshold` wins over this.
    public var mmapThreshold: Int = 4 << 20
    /// Between sweeps for expired leases. Default min(5 s, lease/3).
    public var rescueInterval: Duration?
    /// Backoff of transiently failed jobs.
    public var backoff = Backoff()
    public var fetch = FetchConfiguration()
    public var limits = ImageLimits()
    /// Root of the content-addressed store.
    public var storeRoot: URL
    /// Between store sweeps (one worker at a time sweeps); zero turns them off. Default 10 min.
    public var sweepInterval: Duration = .seconds(600)
    /// Bytes the store may hold before sweeps trim it to half by least recent access; nil for
    /// no limit (the default).
    public var storeSizeLimit: Int64?
    /// The queues this worker claims from, each optionally with a limit on how many of its jobs
    /// take processing slots at once. Empty (the default): every queue, no per-queue limit.
    public var queues: [QueueSlots] = []
    /// Webhook delivery (`options.callback_url`).
    public var webhooks = WebhookConfiguration()
    /// Rows retention, run with the store sweep (every `sweepInterval`, one worker at a time):
    /// succeeded rows finished longer ago than this are deleted. Nil (default): kept.
    public var retainSucceeded: Duration?
    /// The same for failed and cancelled rows. Nil (default): kept.
    public var retainFailed: Duration?
    /// The supervisor's pipe, when this worker runs as the child of `Supervisor`: the jobs
    /// entering and leaving processing are reported on it. Nil (default): unsupervised.
    public var supervisor: SupervisorChannel?
    /// Restarts of the supervised process before this one (a metric). Default 0.
    public var restarts = 0

    public init(storeRoot: URL, workerID: String? = nil, concurrency: Int? = nil) {
        self.storeRoot = storeRoot
        self.workerID = workerID ?? Self.defaultWorkerID()
        self.concurrency = max(1, concurrency ?? Self.defaultConcurrency)
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

/// How webhooks are delivered. Defaults as `halcyon work` documents them.
public struct WebhookConfiguration: Sendable {
    /// Keys of the signatures, in order: each signs `webhook-signature` (Standard Webhooks: one
    /// `v1,…` per secret, so a receiver holding either the old or the new key verifies during a
    /// rotation); the first also signs `X-Halcyon-Signature: sha256=<hex HMAC-SHA256 of the
    /// body>`. Empty: deliveries are not signed.
    public var secrets: [String] = []

    /// Most secrets at once (a rotation needs two).
    public static let maxSecrets = 4
    /// Bytes of one secret.
    public static let secretBytes = 1...1024

    /// Why `secret` cannot sign, or nil: 1–1024 bytes, and one written `whsec_…` must be
    /// base64 after the prefix.
    public static func secretProblem(_ secret: String) -> String? {
        guard secretBytes.contains(secret.utf8.count) else { return "a webhook secret must have 1 to 1024 bytes" }
        guard WebhookSignature(secrets: [secret]) != nil else {
            return "a webhook secret written whsec_… must be base64 after the prefix (Standard Webhooks' form)"
        }
        return nil
    }
    /// Time for one delivery attempt, connection included. Default 10 s.
    public var timeout: Duration = .seconds(10)
    /// Attempts before a delivery is given up (`callback_status = 'failed'`). Default 8.
    public var maxAttempts = 8
    /// Wait before the second attempt; doubles per attempt up to `maxRetryDelay`. Default 1 s.
    public var retryBase: Duration = .seconds(1)
    /// Longest wait between attempts, and the most a receiver's `Retry-After` is honoured.
    /// Default 5 min.
    public var maxRetryDelay: Duration = .seconds(300)
    /// Deliveries in flight at once per worker. Default 8.
    public var concurrency = 8
    /// Deliveries in flight at once to one host, per worker. Default 2.
    public var perHostConcurrency = 2
    /// Failed attempts in a row to one host (timeouts, connection errors, 5xx, 408, 429) after
    /// which a worker stops sending it deliveries for `breakerCooldown` (its circuit opens).
    /// Default 5.
    public var breakerThreshold = 5
    /// How long an open circuit stays open before one delivery probes the host; each failed
    /// probe doubles it, up to `maxRetryDelay`. Default 30 s.
    public var breakerCooldown: Duration = .seconds(30)

    /// Checks the values a command line or a program may set (`job.invalid_options` when not).
    public func validate() throws(HalcyonError) {
        func check(_ ok: Bool, _ message: @autoclosure () -> String) throws(HalcyonError) {
            if !ok { throw HalcyonError(.invalidOptions, message()) }
        }
        try check(secrets.count <= Self.maxSecrets, "at most \(Self.maxSecrets) webhook secrets (a rotation needs two)")
        for secret in secrets {
            if let problem = Self.secretProblem(secret) { throw HalcyonError(.invalidOptions, problem) }
        }
        try check(timeout >= .seconds(1) && timeout <= .seconds(600), "the webhook timeout must be 1s–10m")
        try check((1...50).contains(maxAttempts), "webhook attempts must be 1…50")
        try check(concurrency >= 1 && perHostConcurrency >= 1 && breakerThreshold >= 1, "webhook concurrency and breaker threshold must be positive")
        try check(retryBase > .zero && maxRetryDelay >= retryBase && breakerCooldown > .zero, "webhook delays must be positive")
    }

    public init() {}

    /// The wait after failed attempt `attempt` (1-based): base · 2^(attempt−1), capped at
    /// `maxRetryDelay`; longer when the receiver asked for more (`Retry-After`, in seconds),
    /// up to that same cap.
    public func retryDelay(afterAttempt attempt: Int, retryAfter: Double? = nil) -> Duration {
        let factor = pow(2.0, Double(min(max(attempt - 1, 0), 30)))
        let backoff = min(maxRetryDelay, retryBase * factor)
        guard let retryAfter, retryAfter.isFinite, retryAfter > 0 else { return backoff }
        return max(backoff, min(maxRetryDelay, .milliseconds(Int64(min(retryAfter, 86_400) * 1000))))
    }
}
