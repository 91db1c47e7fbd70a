import Foundation
import HalcyonCore

/// Download limits and policy. Defaults suit a server fetching images from the Internet.
public struct FetchConfiguration: Sendable {
    /// Seconds to establish a connection. Default 10.
    public var connectTimeout: Double = 10
    /// Seconds for the whole transfer. Default 60.
    public var totalTimeout: Double = 60
    /// Abort when slower than `lowSpeedBytes` per second for `lowSpeedSeconds`. Defaults 1 KiB/s for 15 s.
    public var lowSpeedBytes: Int = 1024
    public var lowSpeedSeconds: Int = 15
    /// Largest body accepted, checked against Content-Length and while streaming. Default 50 MiB.
    public var maxBytes: Int = 50 << 20
    /// Largest inline `data:` source: 10 MiB, or `maxBytes` when that is smaller.
    public var maxDataBytes: Int { min(Source.maxDataBytes, maxBytes) }
    /// Longest an attempt waits between download retries, all its sources together; a retry
    /// that would wait past it is not made (the job is retried later with the job-level
    /// backoff instead, holding no slot). Default 60 s.
    public var maxRetryWait: Double = 60
    /// Downloads from one host at a time, per worker (`--per-host-concurrency`). Default 4.
    public var perHostConcurrency: Int = 4
    /// Redirects followed before `fetch.too_many_redirects`. Default 5.
    public var maxRedirects: Int = 5
    /// Directories `file://` sources may read from. Default: none (file sources refused).
    public var fileRoots: [String] = [] { didSet { files = FileRoots(fileRoots) } }
    /// `fileRoots`, resolved once, and the reader that stays beneath them.
    public private(set) var files = FileRoots([])
    public var userAgent: String = "Halcyon/0.1 (+image pipeline worker)"
    /// Which addresses may be connected to. Default: public addresses only.
    public var addressPolicy = AddressPolicy()
    /// Retries per source when the job's `options.retry` does not say. Default: 2 retries,
    /// exponential from 0.5 s.
    public var retry = DelayRetryStrategy()
    /// How long a downloaded original is reused without asking the origin; after that it is
    /// revalidated (If-None-Match / If-Modified-Since; a 304 reuses it). 0 (default) keeps no
    /// originals. Needs `originals`.
    public var originalsTTL: Double = 0
    /// Where originals are kept (the store's `originals/`), when `originalsTTL` > 0.
    public var originals: (any OriginalsCache)?

    public init() {}
}
