import Foundation

/// A categorized error code, `category.reason` (ARCHITECTURE.md §3). Codes are a contract:
/// add reasons, never rename them.
public struct ErrorCode: Hashable, Sendable, CustomStringConvertible {
    public let category: String
    public let reason: String?

    public init(_ category: String, _ reason: String?) {
        self.category = category
        self.reason = reason
    }

    /// `category.reason`, or just `category` for `internal`.
    public var description: String { reason.map { "\(category).\($0)" } ?? category }

    /// Whether a failure with this code ends the job at once. Fetch codes decide this per
    /// source (see `HalcyonError.permanent`); this is their usual verdict.
    public var isPermanentByDefault: Bool {
        switch self {
        case .invalidChain, .invalidSource, .invalidOptions,
            .httpStatus, .tooLarge, .tooManyRedirects, .blockedAddress, .notImage,
            .decodeFailed, .unsupportedFormat, .imageTooLarge, .processingFailed, .overMaxBytes, .watermarkTooLarge, .tooCostly,
            .tooSmallToScore,
            .notCached, .fileNotFound, .resultTooLarge:
            return true
        default:
            return false
        }
    }

    public static let invalidChain = ErrorCode("job", "invalid_chain")
    public static let invalidSource = ErrorCode("job", "invalid_source")
    public static let invalidOptions = ErrorCode("job", "invalid_options")
    /// The attempt was given up while it ran — released at shutdown, cancelled by an operator,
    /// or its lease lost. Never written as the job's outcome (the row is no longer the
    /// worker's); it is what the pipeline stops with.
    public static let cancelled = ErrorCode("job", "cancelled")

    public static let httpStatus = ErrorCode("fetch", "http_status")
    public static let timeout = ErrorCode("fetch", "timeout")
    public static let connection = ErrorCode("fetch", "connection")
    public static let tooLarge = ErrorCode("fetch", "too_large")
    public static let tooManyRedirects = ErrorCode("fetch", "too_many_redirects")
    public static let blockedAddress = ErrorCode("fetch", "blocked_address")
    public static let notImage = ErrorCode("fetch", "not_image")
    public static let sourcesExhausted = ErrorCode("fetch", "sources_exhausted")
    /// A `file://` source that does not exist or cannot be read.
    public static let fileNotFound = ErrorCode("fetch", "file_not_found")

    public static let decodeFailed = ErrorCode("image", "decode_failed")
    public static let unsupportedFormat = ErrorCode("image", "unsupported_format")
    public static let imageTooLarge = ErrorCode("image", "too_large")
    public static let processingFailed = ErrorCode("image", "processing_failed")
    /// `format(…, max_bytes=N)`: even the lowest quality allowed encodes to more than N bytes.
    public static let overMaxBytes = ErrorCode("image", "over_max_bytes")
    /// `watermark(…)`: scaled to the image, with its margins, the watermark does not fit in it.
    public static let watermarkTooLarge = ErrorCode("image", "watermark_too_large")
    /// The chain's estimated work is over the limit (refused before any pixel is decoded), or
    /// its processing ran past the deadline (`--max-job-time`).
    public static let tooCostly = ErrorCode("image", "too_costly")
    /// ImageMagick's process-wide resource limits (memory, map, disk) were exhausted while the
    /// image itself was within the limits: other jobs of the worker held them. Transient.
    public static let resourcesExhausted = ErrorCode("image", "resources_exhausted")
    /// A perceptual metric (SSIMULACRA 2) was asked to score an image under 8×8, the least its
    /// first scale needs: whoever scores skips it (never a job's outcome on its own).
    public static let tooSmallToScore = ErrorCode("image", "too_small_to_score")

    public static let writeFailed = ErrorCode("store", "write_failed")
    /// The store cannot take writes: no space (`ENOSPC`), a quota (`EDQUOT`), read-only
    /// (`EROFS`), no permission (`EACCES`, `EPERM`); a bucket whose quota is reached, or that
    /// refuses a write a probe's write confirms. The worker's condition, not the job's: the job
    /// goes back to `queued` unspent and claiming pauses until the store takes writes again.
    public static let notWritable = ErrorCode("store", "not_writable")
    /// The result is larger than the store can ever hold: its whole filesystem, its size limit,
    /// or what a bucket takes in one object (`EntityTooLarge`).
    public static let resultTooLarge = ErrorCode("store", "result_too_large")
    public static let notCached = ErrorCode("store", "not_cached")
    /// An object store (S3) could not be read: connection errors, timeouts and 5xx past the
    /// client's retries, or an answer that makes no sense.
    public static let readFailed = ErrorCode("store", "read_failed")
    /// The object store refused the credentials or the signature (403, `InvalidAccessKeyId`,
    /// `SignatureDoesNotMatch`, `AccessDenied`): the worker's configuration, not the job.
    public static let accessDenied = ErrorCode("store", "access_denied")
    /// An object in the object store is larger than the reader's bound (refused before its body is read).
    public static let storeTooLarge = ErrorCode("store", "too_large")

    public static let leaseExpired = ErrorCode("worker", "lease_expired")
    /// The database refused to record an attempt's outcome (an application's trigger or
    /// constraint): the entry keeps its reason; the lease lapses and the job is rescued.
    public static let outcomeRejected = ErrorCode("worker", "outcome_rejected")
    /// The worker's image process died (a fault in a C library, a trap, the OOM killer, the
    /// `--max-memory` ceiling) while this job was in processing. Retried; failed for good the
    /// second time (a poison pill).
    public static let workerCrashed = ErrorCode("worker", "crashed")
    public static let `internal` = ErrorCode("internal", nil)
}

/// One source's failure inside `fetch.sources_exhausted`.
public struct SourceFailure: Sendable, Equatable {
    public var source: String
    public var code: ErrorCode
    public var message: String
    public var attempts: Int
    /// Whether this source can never succeed (so retrying the job would not help it).
    public var permanent: Bool

    public init(source: String, code: ErrorCode, message: String, attempts: Int, permanent: Bool) {
        self.source = source
        self.code = code
        self.message = message
        self.attempts = attempts
        self.permanent = permanent
    }
}

/// The error type every pipeline stage throws: a code with its category, a human reason,
/// and the context an operator needs (which source, each source's own failure).
public struct HalcyonError: Error, Sendable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    /// True when retrying the job cannot help.
    public var permanent: Bool
    /// The source this failure concerns, when there is one.
    public var source: String?
    /// Per-source detail for `fetch.sources_exhausted`.
    public var sources: [SourceFailure]
    /// Seconds the server asked us to wait (`Retry-After`), when it did.
    public var retryAfter: Double?
    /// The HTTP status of a `fetch.http_status` failure.
    public var httpStatus: Int?
    /// A library's own words for the failure (ImageMagick's message, with its source-file tail),
    /// kept beside `message`, which says what is wrong in the user's terms.
    public var detail: String?
    /// The job was charged for an image process that was ended for another job (one stuck past
    /// its deadline): `worker.crashed`, but not counted towards its poison-pill limit.
    public var bystander = false

    public init(
        _ code: ErrorCode, _ message: String, permanent: Bool? = nil,
        source: String? = nil, sources: [SourceFailure] = [], detail: String? = nil
    ) {
        self.code = code
        self.message = message
        self.permanent = permanent ?? code.isPermanentByDefault
        self.source = source
        self.sources = sources
        self.detail = detail
    }

    /// `code: message`, the form stored in `last_error`.
    public var description: String { "\(code): \(message)" }

    /// The work was abandoned (shutdown, cancelled row, lost lease): nothing is recorded for it.
    public static var abandoned: HalcyonError { HalcyonError(.cancelled, "job abandoned") }

    /// Wraps any error: a `HalcyonError` stays itself, a task's cancellation is `job.cancelled`,
    /// anything else becomes `internal`.
    public static func wrap(_ error: any Error) -> HalcyonError {
        if let e = error as? HalcyonError { return e }
        if error is CancellationError { return .abandoned }
        return HalcyonError(.internal, String(describing: error))
    }
}
