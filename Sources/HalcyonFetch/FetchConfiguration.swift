import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonS3

/// Download limits and policy. Defaults suit a server fetching images from the Internet; each
/// setting `halcyon work` exposes is described once in `Settings`.
public struct FetchConfiguration: Sendable {
    /// Time to establish a connection. Default: `Settings.connectTimeout`.
    public var connectTimeout: Duration = Settings.connectTimeout.defaultValue
    /// Time for the whole transfer. Default: `Settings.totalTimeout`.
    public var totalTimeout: Duration = Settings.totalTimeout.defaultValue
    /// Abort when slower than `lowSpeedBytes` per second for `lowSpeedTime`.
    public var lowSpeedBytes: Int = 1024
    public var lowSpeedTime: Duration = .seconds(15)
    /// Largest body accepted, checked against Content-Length and while streaming. Default:
    /// `Settings.maxBytes`.
    public var maxBytes: Int = Settings.maxBytes.defaultValue
    /// Why `maxBytes` is less than `--max-download-size`, told in `fetch.too_large` messages
    /// (see `downloadLimit(_:maxMemory:)`); nil when it is that option's value.
    public var maxBytesReason: String?
    /// Largest inline `data:` source: `Source.maxDataBytes`, or `maxBytes` when that is smaller.
    public var maxDataBytes: Int { min(Source.maxDataBytes, maxBytes) }
    /// Longest an attempt waits between download retries, all its sources together; a retry
    /// that would wait past it is not made (the job is retried later with the job-level
    /// backoff instead, holding no slot). Default: `Settings.maxRetryWait`.
    public var maxRetryWait: Duration = Settings.maxRetryWait.defaultValue
    /// Downloads from one host at a time, per worker. Default: `Settings.perHostConcurrency`.
    public var perHostConcurrency: Int = Settings.perHostConcurrency.defaultValue
    /// Redirects followed before `fetch.too_many_redirects`. Default: `Settings.maxRedirects`.
    public var maxRedirects: Int = Settings.maxRedirects.defaultValue
    /// Directories `file://` sources may read from. Default: none (file sources refused).
    public var fileRoots: [String] = [] { didSet { files = FileRoots(fileRoots) } }
    /// `fileRoots`, resolved once, and the reader that stays beneath them.
    public private(set) var files = FileRoots([])
    public var userAgent: String = "Halcyon/\(HalcyonVersion.string) (+image pipeline worker)"
    /// Which addresses may be connected to. Default: public addresses only.
    public var addressPolicy = AddressPolicy()
    /// Retries per source when the job's `options.retry` does not say: `RetryOptions`' defaults.
    public var retry = DelayRetryStrategy(RetryOptions())
    /// How long a downloaded original is reused without asking the origin; after that it is
    /// revalidated (If-None-Match / If-Modified-Since; a 304 reuses it). Zero (default) keeps no
    /// originals. Needs `originals`.
    public var originalsTTL: Duration = Settings.originalsTTL.defaultValue
    /// Where originals are kept (the store's `originals/`), when `originalsTTL` > 0.
    public var originals: (any OriginalsCache)?
    /// How `s3://BUCKET/KEY` sources are read: the endpoint, region, addressing and credentials
    /// (from the AWS variables, `s3Environment`); its bucket and prefix are not used, each source
    /// names its own bucket. Timeouts are this configuration's (`connectTimeout`, `totalTimeout`)
    /// and retries the job's (the client makes one try per attempt). Nil, or without
    /// credentials: `s3://` sources fail with `job.invalid_source` naming the missing variables.
    public var s3: S3Configuration?
    /// The buckets `s3://` sources may name (`HALCYON_S3_SOURCE_BUCKETS`); nil (default): any
    /// bucket the credentials can read.
    public var s3SourceBuckets: Set<String>?

    public init() {}

    /// Reads `s3` and `s3SourceBuckets` from the AWS variables as the S3 client maps them
    /// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
    /// `AWS_ENDPOINT_URL_S3`, …, `HALCYON_S3_PATH_STYLE`) and `HALCYON_S3_SOURCE_BUCKETS`
    /// (comma-separated bucket names). Throws `job.invalid_options` naming what is wrong.
    public mutating func readS3Environment(_ environment: [String: String]) throws(HalcyonError) {
        s3 = try S3Configuration(url: "s3://\(Self.s3PlaceholderBucket)", environment: environment)
        let names = (environment["HALCYON_S3_SOURCE_BUCKETS"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        s3SourceBuckets = names.isEmpty ? nil : Set(names)
        try validate()
    }

    /// The bucket of `s3` before a source's bucket replaces it.
    static let s3PlaceholderBucket = "halcyon-sources"

    /// The largest download of a worker whose memory ceiling is `maxMemory`: `maxDownloadSize`,
    /// or half the ceiling when that is less — a body that alone takes more than half the memory
    /// the process may use cannot be held and decoded under it, and refusing it before the bytes
    /// arrive fails its job at once instead of by the process's deaths. With the reason to tell.
    public static func downloadLimit(_ maxDownloadSize: Int, maxMemory: Int?) -> (bytes: Int, reason: String?) {
        guard let maxMemory, maxMemory > 0, maxMemory / 2 < maxDownloadSize else { return (maxDownloadSize, nil) }
        return (maxMemory / 2, "half of --max-memory")
    }

    /// The settings `halcyon work` exposes for downloads.
    public enum Settings {
        public static let connectTimeout = Setting.duration(
            "--connect-timeout", default: .seconds(10), .milliseconds(100)...(.minutes(10)), "Time to establish a connection")
        public static let totalTimeout = Setting.duration(
            "--fetch-timeout", default: .seconds(60), .seconds(1)...(.days(1)), "Time for a whole download")
        public static let maxBytes = Setting.bytes(
            "--max-download-size", default: 50 << 20, 1...(16 << 30),
            "Largest download accepted (checked against Content-Length and while streaming)",
            detail: "With --max-memory, at most half of it.")
        public static let maxRetryWait = Setting.duration(
            "--max-retry-wait", default: .seconds(60), .zero...(.days(1)),
            "Most an attempt waits between download retries, all its sources together",
            detail: "A retry that would wait longer is not made (the job is retried later instead, holding no slot).")
        public static let perHostConcurrency = Setting.count(
            "--per-host-concurrency", default: 4, 1...1024,
            "Downloads from one host at once (per worker: N workers make N× this)",
            detail: "A 429/503 with Retry-After also pauses the host's other downloads.")
        public static let maxRedirects = Setting.count("--max-redirects", default: 5, 0...50, "Redirects followed per download")
        public static let originalsTTL = Setting.duration(
            "--originals-ttl", default: .zero, .zero...(.days(365)),
            "Keep downloaded originals in the store and reuse them this long without a request; then revalidate (If-None-Match/If-Modified-Since, a 304 reuses them)",
            detail: "0s keeps none.")
        public static let retries = Setting.count(
            "--fetch-retries", default: RetryOptions.defaultMax, RetryOptions.maxRange,
            "Retries per source for failures that can succeed later (timeouts, connection errors, 408, 429, 5xx)",
            detail: "A job's options.retry overrides.")
        public static let retryInterval = Setting.duration(
            "--fetch-retry-interval", default: RetryOptions.defaultInterval, RetryOptions.intervalRange, "Interval before a download retry")
    }

    /// Checks every setting (`job.invalid_options` naming the option).
    public func validate() throws(HalcyonError) {
        try Settings.connectTimeout.check(connectTimeout)
        try Settings.totalTimeout.check(totalTimeout)
        try Settings.maxBytes.check(maxBytes)
        try Settings.maxRetryWait.check(maxRetryWait)
        try Settings.perHostConcurrency.check(perHostConcurrency)
        try Settings.maxRedirects.check(maxRedirects)
        try Settings.originalsTTL.check(originalsTTL)
        try Settings.retries.check(retry.maxRetries)
        try Settings.retryInterval.check(.seconds(retry.interval.seconds))
        try s3?.validate()
        for bucket in s3SourceBuckets ?? [] {
            do throws(HalcyonError) { try S3Configuration.checkBucket(bucket) } catch {
                throw HalcyonError(.invalidOptions, "HALCYON_S3_SOURCE_BUCKETS: \(error.message)")
            }
        }
        guard lowSpeedBytes >= 0, lowSpeedTime >= .zero else { throw HalcyonError(.invalidOptions, "the low-speed limit must not be negative") }
    }
}
