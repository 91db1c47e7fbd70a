import Foundation
import HalcyonDomain
import HalcyonRuntime

/// Image bytes and where they came from.
public struct FetchedImage: Sendable {
    public var data: Data
    /// The sniffed format (never the server's claim).
    public var format: ImageFormat
    /// The source string that produced the bytes.
    public var source: String
}

/// The sources a fetch tried, in order, as it tried them: for a traced job's `fetch` spans.
public final class FetchTrail: @unchecked Sendable {
    /// One source: when it was first tried, how long it took with its retries, how many
    /// attempts, and the bytes it gave or its last error.
    public struct Try: Sendable {
        public var index: Int
        public var source: Source
        public var started: Date
        public var seconds: Double
        public var attempts: Int
        public var result: Result<Int, HalcyonError>
    }

    private let lock = NSLock()
    private var list: [Try] = []

    public init() {}

    func append(_ t: Try) { lock.withLock { list.append(t) } }
    public var tries: [Try] { lock.withLock { list } }
}

/// Decides when a transfer may start, once it has its download slot, and counts its bytes
/// while they arrive (the worker's bound on downloaded bytes held in memory).
public protocol DownloadGate: Sendable {
    /// True when the transfer may start; false when `cancel` was raised while waiting.
    func admit(cancel: CancellationFlag) async -> Bool
    /// The meter of one admitted transfer; `end` it when the transfer ends, however it ends.
    func meter(cancel: CancellationFlag) -> any EndableTransferMeter
}

/// A transfer's meter that gives back what it counted when the transfer ends.
public protocol EndableTransferMeter: TransferMeter {
    /// The transfer ended: what it counted no longer counts here.
    func end()
}

/// Fetches a job's image: its source, then each fallback source, each with its own retries
/// (`RetryStrategy`); identical concurrent requests share one download; every transfer holds
/// one of `concurrency` slots, and retry waits hold none. Bytes that are not an allowed image
/// format fail with `fetch.not_image` and never reach ImageMagick.
public struct Fetcher: Sendable {
    public var configuration: FetchConfiguration
    private let http: HTTPClient
    private let s3: S3Sources
    private let slots: AsyncSemaphore
    /// Per-host limits and `Retry-After` pauses.
    public let hosts: HostLimiter
    private let coalescer = DownloadCoalescer<FetchedImage>()
    private let gate: (any DownloadGate)?

    /// `concurrency`: transfers at once (`--fetch-concurrency`); `gate`: asked in the slot before
    /// each transfer of a file or network source.
    public init(configuration: FetchConfiguration, concurrency: Int = 8, gate: (any DownloadGate)? = nil) {
        self.configuration = configuration
        self.http = HTTPClient(configuration: configuration)
        self.s3 = S3Sources(configuration: configuration)
        self.slots = AsyncSemaphore(max(1, concurrency))
        self.hosts = HostLimiter(perHost: configuration.perHostConcurrency, maxPause: configuration.maxRetryWait)
        self.gate = gate
    }

    /// Downloads in flight right now (coalesced requests count once).
    public var downloadsInFlight: Int { coalescer.inFlight }

    /// Tries the request's sources in order. One source failing fails with its own error;
    /// several all failing is `fetch.sources_exhausted` listing each, transient if any one was.
    /// `trail`, when given, is told of each source tried (a traced job's `fetch` spans).
    public func fetch(_ request: FetchRequest, cancel: CancellationFlag, trail: FetchTrail? = nil) async throws(HalcyonError) -> FetchedImage {
        let strategy = request.retry ?? configuration.retry
        var failures: [SourceFailure] = []
        var lastError: HalcyonError?
        // What this attempt may spend waiting between retries, across all its sources.
        var waitBudget = configuration.maxRetryWait.seconds
        for (index, source) in request.sources.enumerated() {
            let started = Date(), clock = ContinuousClock.now
            let (result, attempts) = await fetchWithRetries(source, request, strategy: strategy, waitBudget: &waitBudget, cancel: cancel)
            trail?.append(
                FetchTrail.Try(
                    index: index, source: source.source, started: started, seconds: (ContinuousClock.now - clock).seconds, attempts: attempts,
                    result: result.map(\.data.count)))
            switch result {
            case .success(let image): return image
            case .failure(let error):
                if cancel.isCancelled { throw error }
                failures.append(
                    SourceFailure(source: source.text, code: error.code, message: error.message, attempts: attempts, permanent: error.permanent))
                lastError = error
            }
        }
        guard var lastError else { throw HalcyonError(.invalidSource, "no source to fetch") }
        if failures.count == 1 {
            if failures[0].attempts > 1 { lastError.message += " (after \(failures[0].attempts) attempts)" }
            throw lastError
        }
        let anyTransient = failures.contains { !$0.permanent }
        throw HalcyonError(
            .sourcesExhausted,
            "all \(failures.count) sources failed: " + failures.map { "\($0.code)" }.joined(separator: ", "),
            permanent: !anyTransient, source: request.sources.first?.text, sources: failures)
    }

    /// Tries `sources` in order (parsed here; an invalid one fails the whole fetch).
    public func fetch(
        sources: [String], headers: [String: String] = [:], retry: (any RetryStrategy)? = nil,
        cancel: CancellationFlag
    ) async throws(HalcyonError) -> FetchedImage {
        let request = try FetchRequest(sources: sources, headers: headers, retry: retry, maxDataBytes: configuration.maxDataBytes)
        return try await fetch(request, cancel: cancel)
    }

    /// Fetches one source, without retries.
    public func fetch(_ sourceText: String, headers: [String: String] = [:], cancel: CancellationFlag) async throws(HalcyonError) -> FetchedImage {
        try await fetch(sources: [sourceText], headers: headers, retry: DelayRetryStrategy(maxRetries: 0, interval: .fixed(0)), cancel: cancel)
    }

    // MARK: Private

    /// Tries one source until it succeeds, fails for good, or the retries' wait would overrun
    /// `waitBudget` (what is left of `maxRetryWait`). Waits end early when `cancel` is raised.
    private func fetchWithRetries(
        _ source: SourceReference, _ request: FetchRequest, strategy: any RetryStrategy,
        waitBudget: inout Double, cancel: CancellationFlag
    ) async -> (Result<FetchedImage, HalcyonError>, Int) {
        var attempt = 0
        while true {
            attempt += 1
            let result = await fetchOnce(source, request, cancel: cancel)
            guard case .failure(var error) = result, !cancel.isCancelled,
                let delay = strategy.delay(beforeRetry: attempt, after: error)
            else {
                return (result, attempt)
            }
            guard delay <= waitBudget else {
                error.message +=
                    " (retries stopped: the next wait, \(TimeSpan.format(delay)), would pass the attempt's \(TimeSpan.format(configuration.maxRetryWait)) retry-wait budget)"
                return (.failure(error), attempt)
            }
            waitBudget -= delay
            guard await cancel.sleep(seconds: delay) else { return (result, attempt) }
        }
    }

    /// One attempt, shared with any identical request in flight (inline `data:` bytes have
    /// nothing to share and would make a huge key).
    private func fetchOnce(_ source: SourceReference, _ request: FetchRequest, cancel: CancellationFlag) async -> Result<FetchedImage, HalcyonError> {
        if case .data = source.source {
            return await Self.download(source, request, http: http, s3: s3, configuration: configuration, cancel: cancel)
        }
        let http = self.http, s3 = self.s3, slots = self.slots, configuration = self.configuration, gate = self.gate, hosts = self.hosts
        return await coalescer.value(for: request.key(for: source), cancel: cancel) { flag in
            let transfer = {
                await slots.withPermit {
                    guard let gate else {
                        return await Self.download(source, request, http: http, s3: s3, configuration: configuration, cancel: flag)
                    }
                    guard await gate.admit(cancel: flag) else { return Result<FetchedImage, HalcyonError>.failure(.abandoned) }
                    let meter = gate.meter(cancel: flag)
                    defer { meter.end() }
                    return await Self.download(source, request, http: http, s3: s3, configuration: configuration, cancel: flag, meter: meter)
                }
            }
            // Network downloads wait for their host first (holding no download slot meanwhile);
            // an s3:// source's host is the configured endpoint's.
            let host: String? =
                switch source.source {
                case .network(let url): url.host?.lowercased()
                case .object: s3.host
                case .file, .data: nil
                }
            guard let host else { return await transfer() }
            guard let result = await hosts.withPermit(host: host, cancel: flag, transfer) else { return .failure(.abandoned) }
            if case .failure(let error) = result, !error.permanent, let after = error.retryAfter, after > 0 {
                hosts.pause(host, for: .seconds(after))
            }
            return result
        }
    }

    private static func download(
        _ source: SourceReference, _ request: FetchRequest, http: HTTPClient, s3: S3Sources,
        configuration: FetchConfiguration, cancel: CancellationFlag, meter: (any TransferMeter)? = nil
    ) async -> Result<FetchedImage, HalcyonError> {
        do {
            // Each blocking transfer or file read on an I/O thread; the originals cache's calls and
            // an S3 source's requests hold none while they wait.
            let data: Data =
                switch source.source {
                case .network(let url):
                    try await Self.getNetwork(url, source, request, http: http, configuration: configuration, cancel: cancel, meter: meter)
                case .file(let path):
                    try await Blocking.run {
                        try configuration.files.read(path, maxBytes: configuration.maxBytes, cancel: cancel, source: source.text, meter: meter)
                    }
                case .object(let bucket, let key): try await s3.read(bucket: bucket, key: key, source, request, cancel: cancel, meter: meter)
                case .data(_, let bytes): bytes
                }
            guard let format = ImageFormat.sniff(data) else {
                if let name = ImageFormat.unsupportedName(data, last: data.suffix(18)) {
                    return .failure(
                        HalcyonError(
                            .unsupportedFormat, "a \(name) image: Halcyon decodes \(ImageFormat.supportedNames)", source: source.text))
                }
                return .failure(
                    HalcyonError(
                        .notImage,
                        data.isEmpty
                            ? "empty body"
                            : "body is not a supported image (magic bytes \(data.prefix(8).map { String(format: "%02x", $0) }.joined()))",
                        source: source.text))
            }
            return .success(FetchedImage(data: data, format: format, source: source.text))
        } catch {
            var error = HalcyonError.wrap(error)
            if error.code == .tooLarge, let reason = configuration.maxBytesReason { error.message += " (the limit is \(reason))" }
            return .failure(error)
        }
    }

    /// A network download (libcurl's transfer on an I/O thread) through the originals cache when
    /// it is on: a fresh original is used without a request; an expired one with validators is
    /// revalidated and a 304 reuses it.
    private static func getNetwork(
        _ url: URL, _ source: SourceReference, _ request: FetchRequest, http: HTTPClient,
        configuration: FetchConfiguration, cancel: CancellationFlag, meter: (any TransferMeter)?
    ) async throws -> Data {
        guard configuration.originalsTTL > .zero, let cache = configuration.originals else {
            return try await Blocking.run { try http.get(url, headers: request.headers, cancel: cancel, meter: meter).body }
        }
        let key = request.key(for: source)
        let cached = await cache.original(for: key)
        if let cached, cached.expires > Date() { return cached.data }
        let revalidate = cached.flatMap { $0.hasValidators ? $0 : nil }
        let response = try await Blocking.run {
            try http.get(url, headers: request.headers, revalidating: revalidate, cancel: cancel, meter: meter)
        }
        let expires = Date().addingTimeInterval(configuration.originalsTTL.seconds)
        if response.status == 304, let revalidate {
            await cache.refresh(key, until: expires)
            return revalidate.data
        }
        if !response.noStore, ImageFormat.sniff(response.body) != nil {
            // A failed save only costs a future download.
            try? await cache.save(
                CachedOriginal(
                    data: response.body, etag: response.etag, lastModified: response.lastModified,
                    expires: expires), for: key)
        }
        return response.body
    }
}
