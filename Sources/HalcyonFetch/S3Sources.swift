import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonS3
import Synchronization

/// How a worker reads `s3://BUCKET/KEY` sources: with the configured endpoint, region and
/// credentials (`FetchConfiguration.s3`), one `S3Client` per bucket (each keeps its connections
/// to the endpoint), made on first use. A job chooses only the bucket and the key: never the
/// endpoint, so an `s3://` source cannot reach any other host (the address policy, which judges
/// the hosts of job-supplied http URLs, has nothing to judge here).
///
/// The clients make one try per call and use the fetch limits' timeouts: retries are the job's
/// (`RetryStrategy`), as for http sources. A read's transfer runs on an I/O thread, as every
/// `S3Client` request's does.
final class S3Sources: Sendable {
    private let configuration: FetchConfiguration
    private let clients = Mutex<[String: S3Client]>([:])
    /// Clients kept at most; past it the table starts afresh (a worker reading from more
    /// buckets than this reconnects more often, nothing worse).
    static let maxClients = 64

    init(configuration: FetchConfiguration) {
        self.configuration = configuration
    }

    /// The endpoint's host: what the per-host limit counts `s3://` downloads against.
    var host: String? { configuration.s3.flatMap { $0.resolvedEndpoint.host?.lowercased() } }

    /// The client for `bucket`, or `job.invalid_source` when the worker has no credentials or
    /// the bucket is not one `HALCYON_S3_SOURCE_BUCKETS` allows.
    func client(bucket: String, source: String) throws(HalcyonError) -> S3Client {
        guard let base = configuration.s3, base.credentials != nil else {
            throw HalcyonError(
                .invalidSource,
                "s3:// sources need credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and the endpoint, AWS_ENDPOINT_URL_S3, unless it is AWS) for the worker",
                source: source)
        }
        if let allowed = configuration.s3SourceBuckets, !allowed.contains(bucket) {
            throw HalcyonError(.invalidSource, "bucket \(bucket) is not one HALCYON_S3_SOURCE_BUCKETS allows", source: source)
        }
        if let client = clients.withLock({ $0[bucket] }) { return client }
        var settings = base
        settings.bucket = bucket
        settings.prefix = ""
        settings.maxAttempts = 1
        settings.connectTimeout = configuration.connectTimeout
        settings.requestTimeout = configuration.totalTimeout
        let client: S3Client
        do {
            client = try S3Client(configuration: settings)
        } catch {
            throw HalcyonError(.invalidSource, "S3 source: \(error.message)", source: source)
        }
        clients.withLock { clients in
            if clients.count >= Self.maxClients { clients.removeAll() }
            clients[bucket] = client
        }
        return client
    }

    /// The object's bytes, through the originals cache when it is on: a fresh original is used
    /// without a request; an expired one with an ETag is revalidated (`If-None-Match`) and a 304
    /// reuses it. A missing object is `fetch.http_status` (404, permanent); other failures get
    /// the `fetch.*` codes an http download would (`S3ErrorCodes.source`).
    func read(
        bucket: String, key: String, _ source: SourceReference, _ request: FetchRequest, cancel: CancellationFlag,
        meter: (any TransferMeter)? = nil
    ) async throws(HalcyonError) -> Data {
        let client = try client(bucket: bucket, source: source.text)
        let maxBytes = configuration.maxBytes
        guard configuration.originalsTTL > .zero, let cache = configuration.originals else {
            return try Self.body(await client.get(key, maxBytes: maxBytes, cancel: cancel, meter: meter, errors: .source), source)
        }
        let cacheKey = request.key(for: source)
        let cached = await cache.original(for: cacheKey)
        if let cached, cached.expires > Date() { return cached.data }
        let revalidate = cached.flatMap { $0.etag == nil ? nil : $0 }
        let result = try await client.get(key, maxBytes: maxBytes, ifNoneMatch: revalidate?.etag, cancel: cancel, meter: meter, errors: .source)
        let expires = Date().addingTimeInterval(configuration.originalsTTL.seconds)
        if case .notModified = result, let revalidate {
            await cache.refresh(cacheKey, until: expires)
            return revalidate.data
        }
        let data = try Self.body(result, source)
        if case .object(let object) = result, ImageFormat.sniff(data) != nil {
            // A failed save only costs a future download.
            try? await cache.save(CachedOriginal(data: data, etag: object.info.etag, lastModified: nil, expires: expires), for: cacheKey)
        }
        return data
    }

    private static func body(_ result: S3GetResult, _ source: SourceReference) throws(HalcyonError) -> Data {
        switch result {
        case .object(let object): return object.data
        case .notFound(let code):
            throw HalcyonError(
                .httpStatus, "S3 GET \(source.text.prefix(300)): HTTP 404 \(code ?? "NoSuchKey")", permanent: true, source: source.text)
        case .notModified:
            throw HalcyonError(
                .connection, "S3 GET \(source.text.prefix(300)): HTTP 304 to an unconditional request", permanent: false, source: source.text)
        }
    }
}
