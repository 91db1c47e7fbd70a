import Foundation
import HalcyonDomain

/// A claimed job, as the worker sees it: the row's inputs, not yet validated. The claim builds
/// it from its row (`init(row:)`); a column the worker reads is a field here, its line in
/// `init(row:)` and its name in `claimedColumns` (which claim.sql selects).
public struct Job: Sendable, Identifiable {
    public var id: Int64
    public var source: String
    public var fallbackSources: [String]
    public var processors: String
    public var cacheKey: String?
    /// The `options` column as JSON text.
    public var options: String
    public var priority: Int
    /// This claim's attempt number (1 for the first run).
    public var attempt: Int
    /// Attempts before the job fails for good. Default: `defaultMaxAttempts`.
    public var maxAttempts: Int
    /// Seconds the job waited between becoming runnable and this claim.
    public var queueWait: Double
    /// The named queue it was claimed from.
    public var queue: String
    /// The presets its chain names (`preset(NAME)`), as the worker read them right after the
    /// claim (`JobQueue.presets(named:)`); empty as `claim` returns it.
    public var presets: [String: Preset]
    /// When this claim was made (`started_at`, `Claim.stamp`).
    public var claimedAt: String?
    /// Its queue keeps its results to itself (`halcyon.queues.isolated_keys`): they are stored
    /// and found under the queue's name too.
    public var isolatedKeys: Bool
    /// The share of its queue it was taken from; nil: the queue's common share.
    public var fairKey: String?
    /// The enqueuer's W3C traceparent (`TraceContext`), which the table checked; nil: none.
    public var traceparent: String?
    /// The enqueuer's `tracestate`, which travels with its traceparent (read by a worker that
    /// exports spans); nil: none.
    public var tracestate: String?
    /// The trace an earlier attempt's spans were exported in (`trace_id`), which later attempts
    /// keep; nil: none yet.
    public var recordedTraceID: String?

    public init(
        id: Int64, source: String, fallbackSources: [String] = [], processors: String = "",
        cacheKey: String? = nil, options: String = "{}", priority: Int = 0, attempt: Int = 1,
        maxAttempts: Int = defaultMaxAttempts, queueWait: Double = 0, queue: String = QueueName.default, presets: [String: Preset] = [:],
        claimedAt: String? = nil, isolatedKeys: Bool = false, fairKey: String? = nil
    ) {
        self.fairKey = fairKey
        self.claimedAt = claimedAt
        self.isolatedKeys = isolatedKeys
        self.id = id
        self.source = source
        self.fallbackSources = fallbackSources
        self.processors = processors
        self.cacheKey = cacheKey
        self.options = options
        self.priority = priority
        self.attempt = attempt
        self.maxAttempts = maxAttempts
        self.queueWait = queueWait
        self.queue = queue
        self.presets = presets
    }
}

extension Job {
    /// A job's attempts when its enqueue says nothing: the `max_attempts` column's default (and
    /// the enqueue functions'), which migrations/0001_jobs.sql states; a queue test reads the
    /// column's default from a migrated database and compares.
    public static let defaultMaxAttempts = 5

    /// The job columns `init(row:)` reads: the claim selects these (claim.sql), then its own
    /// `queue_wait`, `claimed_at` and `isolated_keys` (`SQL.Claim.Row`). `QueryFileTests` checks
    /// that each of them reaches the job.
    static let claimedColumns = [
        "id", "source", "fallback_sources", "processors", "cache_key", "options", "priority", "attempt", "max_attempts", "queue",
        "fair_key", "traceparent", "tracestate", "trace_id",
    ]

    /// The job of a claimed `row`, with what the claim says beside it: how long it waited,
    /// when it was claimed (`Claim.stamp`) and whether its queue isolates its keys. Nil without
    /// a source (a row the claim did not select it for). Defaults stand for NULLs the table's
    /// constraints rule out.
    public init?(row: JobRow, queueWait: Double? = nil, claimedAt: String? = nil, isolatedKeys: Bool? = nil) {
        guard let source = row.source else { return nil }
        self.init(id: row.id, source: source)
        fallbackSources = row.fallbackSources ?? []
        processors = row.processors ?? ""
        cacheKey = row.cacheKey
        options = row.options ?? "{}"
        priority = row.priority ?? 0
        attempt = row.attempt ?? 1
        maxAttempts = row.maxAttempts ?? Job.defaultMaxAttempts
        queue = row.queue ?? QueueName.default
        fairKey = row.fairKey
        traceparent = row.traceparent
        tracestate = row.tracestate
        recordedTraceID = row.traceID
        self.queueWait = max(0, queueWait ?? 0)
        self.claimedAt = claimedAt
        self.isolatedKeys = isolatedKeys ?? false
    }
}

extension Job {
    /// This job as claimed: its id and this attempt.
    public var claim: Claim { Claim(id: id, attempt: attempt, stamp: claimedAt) }

    /// The trace id of the request that enqueued it (its traceparent's), for log lines about it;
    /// nil without one, or for a traceparent the W3C format does not allow (a row edited past the
    /// table's checks: its text never reaches a log line).
    public var traceID: String? { traceparent.flatMap(TraceContext.validTraceID(of:)) }
}

/// One claim of a job: its id, the attempt it was claimed for and when it was claimed. Every
/// statement that records an outcome or lets go of a job names all three, so an old attempt cannot
/// touch a newer claim — not even one with the same attempt number and worker id, as after a
/// release (which gives the attempt back) when the supervised image process that held it died and
/// its successor, under the same worker id, claimed the job again.
public struct Claim: Hashable, Sendable, CustomStringConvertible {
    public var id: Int64
    public var attempt: Int
    /// The claim's `started_at` in UTC, as the claim returned it (claim.sql): microseconds,
    /// unique per claim of a row. Nil matches any claim of this attempt (a caller that did not
    /// claim the job itself).
    public var stamp: String?

    public init(id: Int64, attempt: Int, stamp: String? = nil) {
        self.id = id
        self.attempt = attempt
        self.stamp = stamp
    }

    public var description: String { "\(id)#\(attempt)" }
}

/// What a successful job records in its `result_*` columns.
public struct JobResult: Sendable, Equatable {
    public var key: String
    public var digest: String
    /// Relative to the store root.
    public var path: String
    public var bytes: Int
    public var width: Int
    public var height: Int
    public var format: String
    public var cacheHit: Bool
    /// The source that produced it (nil for a cache hit).
    public var source: String?
    /// What the decode learned about the source (from the store's key file on a hit, when it
    /// recorded them), written to `source_*` as it is (the caller has dropped a GPS position the
    /// job did not ask to keep).
    public var facts: SourceRecord?
    /// The placeholders the job asked for, a JSON object's text.
    public var placeholdersJSON: String?
    /// The encoder quality the stored bytes were written with, and their perceptual score, when
    /// known (`result_quality`, `result_score`; held to `ResultMeasures`' bounds when recorded).
    public var quality: Int?
    public var score: Double?
    /// Whether the quality was `quality` and a half (`result_quality_exact`).
    public var halfQuality = false
    /// The PDQ hashes the job asked for (`source_pdq`, `result_pdq` and their qualities).
    public var sourceHash: PerceptualHash?
    public var outputHash: PerceptualHash?
    /// The source's seven other dihedral hashes (`source_pdq_dihedral`).
    public var sourceVariants: [String]?
    /// Whether `score` is below the chain's `min_score` (`result_target_missed`); nil when the
    /// chain has no target or the result no score.
    public var targetMissed: Bool?
    /// A JPEG's chroma sampling (`result_chroma`).
    public var chroma: ChromaSampling?
    /// A picture set's manifest (`result_manifest`: rungs, srcset, picture), a JSON object's text.
    public var manifestJSON: String?

    public init(
        key: String, digest: String, path: String, bytes: Int, width: Int, height: Int,
        format: String, cacheHit: Bool, source: String?, facts: SourceRecord? = nil, placeholdersJSON: String? = nil,
        quality: Int? = nil, score: Double? = nil
    ) {
        self.key = key
        self.digest = digest
        self.path = path
        self.bytes = bytes
        self.width = width
        self.height = height
        self.format = format
        self.cacheHit = cacheHit
        self.source = source
        self.facts = facts
        self.placeholdersJSON = placeholdersJSON
        self.quality = quality
        self.score = score
    }
}
