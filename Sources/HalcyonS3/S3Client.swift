import Foundation
import HalcyonDomain
import HalcyonRuntime
import Synchronization

/// What a conditional PUT did.
public enum S3PutResult: Sendable, Equatable {
    /// The object was written (its ETag when the server sent one).
    case created(etag: String?)
    /// An object is already at the key (`If-None-Match: *` answered 412): nothing was written.
    case alreadyExists
}

/// What `copyMetadata` did.
public enum S3CopyResult: Sendable, Equatable {
    /// The metadata was replaced; the object's new ETag.
    case replaced(etag: String?)
    /// The object changed (or was deleted and rewritten) since its ETag was read: nothing was done.
    case changedConcurrently
    /// No object at the key.
    case notFound
}

/// An object's facts, from HEAD or GET.
public struct S3ObjectInfo: Sendable, Equatable {
    public var size: Int
    /// The ETag as the server sends it, quotes included.
    public var etag: String?
    public var contentType: String?
    /// `x-amz-meta-*` headers, names lower-cased without the prefix.
    public var metadata: [String: String]
    public var lastModified: Date?
}

/// An object read whole.
public struct S3Object: Sendable {
    public var data: Data
    public var info: S3ObjectInfo
}

/// What a conditional GET found (`S3Client.get(_:maxBytes:ifNoneMatch:cancel:errors:)`).
public enum S3GetResult: Sendable {
    /// The object, read whole.
    case object(S3Object)
    /// The object still has the ETag asked about (304): nothing was read.
    case notModified(S3ObjectInfo)
    /// No object at the key (404), with S3's error code (`NoSuchKey`, `NoSuchBucket`) when it sent one.
    case notFound(code: String?)
}

/// What a ranged GET found (`S3Client.get(_:range:ifMatch:)`).
public enum S3RangeResult: Sendable {
    /// The bytes of the range asked for (fewer at the object's end), the object's whole size and
    /// its facts (the ETag, the metadata; `info.size` is the object's size too).
    case bytes(Data, info: S3ObjectInfo)
    /// The object's ETag is not the one given (`If-Match` answered 412), or the range starts past
    /// its end (416): it was replaced since that ETag was read. Nothing was read.
    case changed
    /// No object at the key (404).
    case notFound
}

/// The error codes a call's failures are given. The store's calls use `store(_:)`; a fetcher
/// reading a job's source uses `source`, the `fetch.*` codes an http download would get.
public struct S3ErrorCodes: Sendable {
    /// An error status (other than 401 and 403), and failures nothing below names.
    public var status: ErrorCode
    /// A request that timed out.
    public var timeout: ErrorCode
    /// A connection that could not be made or broke.
    public var connection: ErrorCode
    /// 401 or 403: refused credentials or signature, or no permission.
    public var accessDenied: ErrorCode
    /// Whether a 401/403 is final (a job's source) or may pass (the store's own credentials being rotated).
    public var accessDeniedIsPermanent: Bool
    /// A GET over its bound.
    public var tooLarge: ErrorCode

    public init(
        status: ErrorCode, timeout: ErrorCode, connection: ErrorCode, accessDenied: ErrorCode, accessDeniedIsPermanent: Bool, tooLarge: ErrorCode
    ) {
        self.status = status
        self.timeout = timeout
        self.connection = connection
        self.accessDenied = accessDenied
        self.accessDeniedIsPermanent = accessDeniedIsPermanent
        self.tooLarge = tooLarge
    }

    /// The store's: `code` (`store.read_failed`, `store.write_failed`), `store.access_denied`
    /// (not permanent), `store.too_large`.
    public static func store(_ code: ErrorCode) -> S3ErrorCodes {
        S3ErrorCodes(
            status: code, timeout: code, connection: code, accessDenied: .accessDenied, accessDeniedIsPermanent: false, tooLarge: .storeTooLarge)
    }

    /// A job's `s3://` source: `fetch.http_status` (the status in the message; 403 permanent),
    /// `fetch.timeout`, `fetch.connection`, `fetch.too_large`.
    public static let source = S3ErrorCodes(
        status: .httpStatus, timeout: .timeout, connection: .connection, accessDenied: .httpStatus, accessDeniedIsPermanent: true,
        tooLarge: .tooLarge)
}

/// One key of a listing.
public struct S3ListEntry: Sendable, Equatable {
    /// The key relative to the configured prefix.
    public var key: String
    public var size: Int
    public var lastModified: Date?
    public var etag: String?
}

/// One page of a listing.
public struct S3ListPage: Sendable {
    public var entries: [S3ListEntry]
    /// Pass to the next `list` call; nil on the last page.
    public var nextContinuationToken: String?
}

/// An S3 client for one bucket (and prefix): PUT (never overwriting), GET with a size bound,
/// HEAD, DELETE, metadata replacement by a guarded self-copy, ListObjectsV2 page by page,
/// presigned GET URLs. Every key is relative to `configuration.prefix`.
///
/// Every request is `async` and holds no thread while it waits: each try's libcurl transfer,
/// which blocks the thread it runs on, runs on one of `Blocking`'s I/O threads, and the waits
/// between tries are `Task.sleep`s. Requests are signed with SigV4 (`SigV4`), sent through
/// pooled libcurl handles that keep their connections. Failures that can pass (5xx, 429,
/// `SlowDown`, connection errors, timeouts) are retried up to `maxAttempts` with exponential
/// backoff and full jitter (`S3Configuration.retryBackoff`); other 4xx are not. A raised
/// `cancel` flag stops a transfer and the retries (`job.cancelled`); cancelling the calling task
/// ends a wait between tries and sends no further try (`job.cancelled`), while a try already
/// sent runs to its end, as any call on a blocking thread does. Errors are `HalcyonError`s: `store.write_failed` for writes,
/// `store.read_failed` for reads, `store.access_denied` for refused credentials,
/// `store.too_large` for a GET over its bound; their messages carry S3's `<Code>` and
/// `<Message>`, never a credential.
public struct S3Client: Sendable {
    public let configuration: S3Configuration
    private let transport: S3Transport

    /// Checks `configuration` (`job.invalid_options`).
    public init(configuration: S3Configuration) throws(HalcyonError) {
        try configuration.validate()
        self.configuration = configuration
        self.transport = S3Transport(configuration: configuration)
    }

    /// Requests this client (and its copies) has sent, every try counted: what a store hit
    /// costs, measured.
    public var requestsSent: Int { transport.sent.load(ordering: .relaxed) }

    // MARK: Objects

    /// Writes `data` at `key` unless an object is there already (with `ifNoneMatch`, the
    /// default: `If-None-Match: *`, so a concurrent writer never overwrites — one of them gets
    /// `.created`, the others `.alreadyExists`). Without it, the object is replaced.
    /// A retried PUT (after a timeout, say) may find its own first try's object and answer
    /// `.alreadyExists`: harmless when keys name their contents.
    public func put(
        _ key: String, data: Data, contentType: String = "application/octet-stream", metadata: [String: String] = [:], ifNoneMatch: Bool = true
    ) async throws(HalcyonError) -> S3PutResult {
        let full = try fullKey(key, .writeFailed)
        var headers: [(name: String, value: String)] = [("content-type", contentType)]
        try Self.checkHeaderValue(contentType, "content type", .writeFailed)
        headers += try metadataHeaders(metadata, .writeFailed)
        if ifNoneMatch { headers.append(("if-none-match", "*")) }
        let request = S3Request(method: "PUT", key: full, headers: headers, body: data, maxBody: S3Transport.maxErrorBody)
        let response = try await exchange(request, .writeFailed, accept: [412])
        if response.status == 412 { return .alreadyExists }
        return .created(etag: response.header("etag"))
    }

    /// The object at `key` with its facts, or nil when there is none. Refuses (`store.too_large`)
    /// an object over `maxBytes` before reading it all: on its Content-Length, else as the count
    /// passes the bound.
    public func get(_ key: String, maxBytes: Int) async throws(HalcyonError) -> S3Object? {
        let full = try fullKey(key, .readFailed)
        let request = S3Request(method: "GET", key: full, maxBody: max(0, maxBytes))
        let response = try await exchange(request, .readFailed, accept: [404])
        if response.status == 404 { return nil }
        var info = Self.info(response)
        info.size = response.body.count
        return S3Object(data: response.body, info: info)
    }

    /// A GET for a reader with its own error codes (`errors`), that can be cancelled and can be
    /// conditional: with `ifNoneMatch` (an ETag read before), an unchanged object answers
    /// `.notModified` without its body. Refuses an object over `maxBytes` before reading it all
    /// (`errors.tooLarge`); a raised `cancel` stops the transfer (`job.cancelled`); `meter` is told
    /// of each chunk of the body as it arrives.
    public func get(
        _ key: String, maxBytes: Int, ifNoneMatch: String? = nil, cancel: CancellationFlag? = nil, meter: (any TransferMeter)? = nil,
        errors: S3ErrorCodes
    ) async throws(HalcyonError) -> S3GetResult {
        let full = try fullKey(key, errors.status)
        var request = S3Request(method: "GET", key: full, maxBody: max(0, maxBytes))
        if let ifNoneMatch { request.headers.append(("if-none-match", ifNoneMatch)) }
        request.cancel = cancel
        request.meter = meter
        let response = try await exchange(request, errors.status, accept: [304, 404], errors: errors)
        switch response.status {
        case 304: return .notModified(Self.info(response))
        case 404: return .notFound(code: Self.parseError(response.body).code)
        default:
            var info = Self.info(response)
            info.size = response.body.count
            return .object(S3Object(data: response.body, info: info))
        }
    }

    /// Bytes `range` of the object at `key` (`Range: bytes=…`): never more than `range.count`
    /// bytes are read, whatever the server sends. With `ifMatch` (an ETag read before), an object
    /// replaced since is `.changed` — checked by the server (`If-Match`) and again against the
    /// answer's own ETag — so reading an object range by range never mixes two objects' bytes.
    /// The answer must be exactly the range asked for (its `Content-Range`, or a whole object that
    /// fits in it when the server ignores `Range`); anything else is `store.read_failed`.
    public func get(_ key: String, range: Range<Int>, ifMatch: String? = nil) async throws(HalcyonError) -> S3RangeResult {
        let full = try fullKey(key, .readFailed)
        guard range.lowerBound >= 0, !range.isEmpty else {
            throw HalcyonError(.readFailed, "a ranged GET needs a non-empty range from 0; got \(range)", permanent: true)
        }
        var request = S3Request(method: "GET", key: full, maxBody: range.count)
        request.headers.append(("range", "bytes=\(range.lowerBound)-\(range.upperBound - 1)"))
        if let ifMatch { request.headers.append(("if-match", ifMatch)) }
        let response = try await exchange(request, .readFailed, accept: [404, 412, 416])
        switch response.status {
        case 404: return .notFound
        case 412, 416: return .changed
        default: break
        }
        var info = Self.info(response)
        if let ifMatch, info.etag != ifMatch { return .changed }
        let what = "S3 ranged GET of \(location(full))"
        if response.status == 206 {
            guard let answered = response.header("content-range").flatMap(Self.parseContentRange),
                answered.range.lowerBound == range.lowerBound, answered.range.count == response.body.count,
                answered.range.upperBound == min(range.upperBound, answered.total)
            else {
                throw HalcyonError(
                    .readFailed,
                    "\(what) \(range): the answer is not that range (Content-Range: \(response.header("content-range") ?? "none"), \(response.body.count) bytes)",
                    source: location(full))
            }
            info.size = answered.total
        } else {
            // 200: the server ignored `Range` and sent the whole object, which fits in the range.
            guard range.lowerBound == 0 else {
                throw HalcyonError(.readFailed, "\(what) \(range): the server sent the whole object (it ignores Range)", source: location(full))
            }
            info.size = response.body.count
        }
        return .bytes(response.body, info: info)
    }

    /// The facts of the object at `key` (size, ETag, type, metadata, last modification), or nil.
    public func head(_ key: String) async throws(HalcyonError) -> S3ObjectInfo? {
        let full = try fullKey(key, .readFailed)
        let response = try await exchange(S3Request(method: "HEAD", key: full, maxBody: 0), .readFailed, accept: [404])
        return response.status == 404 ? nil : Self.info(response)
    }

    /// Deletes the object at `key`; no error when there is none (S3 answers 204 either way).
    public func delete(_ key: String) async throws(HalcyonError) {
        let full = try fullKey(key, .writeFailed)
        _ = try await exchange(S3Request(method: "DELETE", key: full, maxBody: S3Transport.maxErrorBody), .writeFailed, accept: [404])
    }

    /// Replaces the object's user metadata with `metadata` by copying it onto itself
    /// (`x-amz-metadata-directive: REPLACE`), keeping its content type. Guarded by
    /// `x-amz-copy-source-if-match` with `etag`, so an object changed in between is not
    /// clobbered (`.changedConcurrently`). Given both `etag` and `contentType` (what a HEAD or GET
    /// of the object just read) it is one request; a HEAD reads whichever is missing first.
    public func copyMetadata(
        _ key: String, metadata: [String: String], ifMatch etag: String? = nil, contentType: String? = nil
    ) async throws(HalcyonError) -> S3CopyResult {
        let full = try fullKey(key, .writeFailed)
        let metaHeaders = try metadataHeaders(metadata, .writeFailed)
        var guardTag = etag, type = contentType
        if guardTag == nil || type == nil {
            guard let current = try await head(key) else { return .notFound }
            guardTag = guardTag ?? current.etag
            type = type ?? current.contentType
        }
        guard let guardTag else {
            throw HalcyonError(.writeFailed, "S3 sent no ETag for \(location(full)); the copy cannot be guarded", source: location(full))
        }
        let source = "/\(configuration.bucket)/" + SigV4.uriEncode(full, encodeSlash: false)
        var headers: [(name: String, value: String)] = [
            ("x-amz-copy-source", source), ("x-amz-metadata-directive", "REPLACE"), ("x-amz-copy-source-if-match", guardTag),
            ("content-type", type ?? "application/octet-stream"),
        ]
        headers += metaHeaders
        let request = S3Request(method: "PUT", key: full, headers: headers, maxBody: S3Transport.maxErrorBody)
        let response = try await exchange(request, .writeFailed, accept: [404, 412])
        switch response.status {
        case 404: return .notFound
        case 412: return .changedConcurrently
        default:
            let result = try? MiniXML.parse(response.body)
            return .replaced(etag: result?.value("ETag") ?? response.header("etag"))
        }
    }

    /// One page of the keys under `prefix` (relative to the configured prefix), in key order,
    /// at most `maxKeys` (1–1000) — ListObjectsV2. Pass the page's `nextContinuationToken` to
    /// get the next; memory stays bounded by one page.
    public func list(prefix: String = "", continuationToken: String? = nil, maxKeys: Int = 1000) async throws(HalcyonError) -> S3ListPage {
        guard (1...1000).contains(maxKeys) else { throw HalcyonError(.readFailed, "maxKeys must be 1 to 1000; got \(maxKeys)", permanent: true) }
        let fullPrefix = configuration.prefix + prefix
        var query: [(name: String, value: String)] = [
            ("list-type", "2"), ("max-keys", String(maxKeys)), ("encoding-type", "url"),
        ]
        if !fullPrefix.isEmpty { query.append(("prefix", fullPrefix)) }
        if let continuationToken { query.append(("continuation-token", continuationToken)) }
        let request = S3Request(method: "GET", key: nil, query: query, maxBody: configuration.maxXMLBytes)
        let response = try await exchange(request, .readFailed, accept: [])
        let root: XMLElement
        do { root = try MiniXML.parse(response.body) } catch {
            throw HalcyonError(.readFailed, "S3 list of \(location(fullPrefix)): \(error)", source: location(fullPrefix))
        }
        guard root.name == "ListBucketResult" else {
            throw HalcyonError(.readFailed, "S3 list of \(location(fullPrefix)) answered <\(root.name)>", source: location(fullPrefix))
        }
        let urlEncoded = root.value("EncodingType") == "url"
        var entries: [S3ListEntry] = []
        entries.reserveCapacity(root.children.count)
        for item in root.all("Contents") {
            guard var key = item.value("Key") else { continue }
            if urlEncoded { key = Self.formDecode(key) }
            guard key.hasPrefix(configuration.prefix) else { continue }
            entries.append(
                S3ListEntry(
                    key: String(key.dropFirst(configuration.prefix.count)), size: item.value("Size").flatMap { Int($0) } ?? 0,
                    lastModified: item.value("LastModified").flatMap(Self.parseISO8601), etag: item.value("ETag")))
        }
        let truncated = root.value("IsTruncated") == "true"
        let token = truncated ? root.value("NextContinuationToken").flatMap { $0.isEmpty ? nil : $0 } : nil
        if truncated && token == nil {
            throw HalcyonError(
                .readFailed, "S3 list of \(location(fullPrefix)) is truncated but has no continuation token", source: location(fullPrefix))
        }
        return S3ListPage(entries: entries, nextContinuationToken: token)
    }

    /// A URL that GETs the object at `key` without credentials until `expires` has passed
    /// (1 s to 7 days; S3's limit), signed for `now`. Needs credentials.
    public func presignedGetURL(_ key: String, expires: Duration, now: Date = Date()) throws(HalcyonError) -> URL {
        let full = try fullKey(key, .readFailed)
        guard let credentials = configuration.credentials else {
            throw HalcyonError(.invalidOptions, "a presigned URL needs credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)")
        }
        let seconds = expires.components.seconds + (expires.components.attoseconds > 0 ? 1 : 0)
        let (base, host, path) = transport.location(key: full)
        let signer = SigV4(credentials: credentials, region: configuration.region)
        let signature = try signer.presign(
            SigV4.Request(method: "GET", path: path, headers: [("host", host)]), date: now, expires: Int(clamping: seconds))
        // The signature last, as AWS writes it (the others in signing order).
        let query = SigV4.encodedQuery(signature.query.filter { $0.name != "X-Amz-Signature" }) + "&X-Amz-Signature=" + signature.signature
        return URL(string: base + SigV4.uriEncode(path, encodeSlash: false) + "?" + query)!
    }

    /// `s3://bucket/key` of a key relative to the prefix (for messages and `source`).
    public func location(ofKey key: String) -> String { location(configuration.prefix + key) }

    // MARK: Internals

    private func location(_ fullKey: String) -> String { "s3://\(configuration.bucket)/\(fullKey)" }

    private func fullKey(_ key: String, _ code: ErrorCode) throws(HalcyonError) -> String {
        let full = configuration.prefix + key
        guard !key.isEmpty else { throw HalcyonError(code, "an S3 key must not be empty", permanent: true) }
        let n = full.utf8.count
        guard n <= S3Configuration.maxKeyBytes else {
            throw HalcyonError(
                code, "S3 key \(location(String(full.prefix(64))))… is \(n) bytes, over S3's \(S3Configuration.maxKeyBytes)", permanent: true)
        }
        return full
    }

    private func metadataHeaders(_ metadata: [String: String], _ code: ErrorCode) throws(HalcyonError) -> [(name: String, value: String)] {
        var total = 0
        var headers: [(name: String, value: String)] = []
        for (name, value) in metadata.sorted(by: { $0.key < $1.key }) {
            let okName =
                !name.isEmpty && name.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x5F }
            guard okName else {
                throw HalcyonError(code, "S3 metadata name \"\(name)\" must be lower-case letters, digits, - and _", permanent: true)
            }
            try Self.checkHeaderValue(value, "metadata value of \(name)", code)
            total += name.utf8.count + value.utf8.count
            headers.append(("x-amz-meta-\(name)", value))
        }
        guard total <= S3Configuration.maxMetadataBytes else {
            throw HalcyonError(code, "S3 metadata is \(total) bytes, over S3's \(S3Configuration.maxMetadataBytes)", permanent: true)
        }
        return headers
    }

    /// What a refused write means beyond this write: the bucket cannot take writes (a quota
    /// reached, its storage full: `store.not_writable`), or the object is larger than the server
    /// takes in one (`store.result_too_large`); nil for anything else.
    static func writeRefusal(status: Int, code: String?) -> ErrorCode? {
        if status == 507 { return .notWritable }
        switch code {
        case "QuotaExceeded", "XMinioAdminBucketQuotaExceeded", "XMinioStorageFull", "StorageFull", "InsufficientStorage": return .notWritable
        case "EntityTooLarge": return .resultTooLarge
        default: return nil
        }
    }

    /// Printable ASCII without leading or trailing spaces (what S3 keeps byte for byte in a header).
    private static func checkHeaderValue(_ value: String, _ what: String, _ code: ErrorCode) throws(HalcyonError) {
        let ok = value.utf8.allSatisfy { $0 >= 0x20 && $0 <= 0x7E } && value.first != " " && value.last != " "
        guard ok else { throw HalcyonError(code, "S3 \(what) must be printable ASCII without leading or trailing spaces", permanent: true) }
    }

    /// Sends `request` with retries; returns a 2xx answer or one whose status is in `accept`;
    /// throws the rest with `errors`' codes (default: the store's, `code`, `store.access_denied`,
    /// `store.too_large`). Each try on an I/O thread, the waits between them on no thread.
    private func exchange(
        _ request: S3Request, _ code: ErrorCode, accept: Set<Int>, errors: S3ErrorCodes? = nil
    ) async throws(HalcyonError) -> S3Response {
        let errors = errors ?? .store(code)
        let what = "S3 \(request.method) \(location(request.key ?? configuration.prefix))"
        let source = location(request.key ?? configuration.prefix)
        var attempt = 0
        while true {
            attempt += 1
            let last = attempt >= configuration.maxAttempts
            var retryAfter: Double?
            let failure: HalcyonError
            if request.cancel?.isCancelled == true { throw HalcyonError(.cancelled, "\(what): cancelled", source: source) }
            switch await send(request) {
            case .success(let response):
                let status = response.status
                if accept.contains(status) { return response }
                let s3Error = Self.parseError(response.body)
                // CopyObject can answer 200 with an <Error> body.
                if (200..<300).contains(status) && !(s3Error.code != nil && request.headers.contains { $0.name == "x-amz-copy-source" }) {
                    return response
                }
                let detail = [s3Error.code, s3Error.message].compactMap { $0 }.joined(separator: ": ")
                let text = "\(what): HTTP \(status)" + (detail.isEmpty ? "" : " \(detail)")
                let retryable =
                    status >= 500 || status == 429 || (200..<300).contains(status)
                    || ["SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "Throttling", "ThrottlingException"].contains(
                        s3Error.code ?? "")
                if status == 403 || status == 401 {
                    throw HalcyonError(
                        errors.accessDenied, text, permanent: errors.accessDeniedIsPermanent, source: source,
                        detail: s3Error.requestID.map { "request id \($0)" })
                }
                if errors.status == .writeFailed, let code = Self.writeRefusal(status: status, code: s3Error.code) {
                    throw HalcyonError(
                        code, text, permanent: code == .resultTooLarge, source: source, detail: s3Error.requestID.map { "request id \($0)" })
                }
                var error = HalcyonError(errors.status, text, permanent: false, source: source, detail: s3Error.requestID.map { "request id \($0)" })
                guard retryable else {
                    error.permanent = true
                    throw error
                }
                retryAfter = response.header("retry-after").flatMap { Double($0) }
                error.retryAfter = retryAfter
                failure = error
            case .failure(let transportFailure):
                switch transportFailure.kind {
                case .tooLarge(let n):
                    let maxBytes = request.maxBody
                    throw HalcyonError(errors.tooLarge, "\(what): the object is over \(maxBytes) bytes (\(n) seen)", source: source)
                case .timeout:
                    failure = HalcyonError(errors.timeout, "\(what): timed out (\(transportFailure.reason))", permanent: false, source: source)
                case .connection:
                    failure = HalcyonError(errors.connection, "\(what): \(transportFailure.reason)", permanent: false, source: source)
                case .cancelled:
                    throw HalcyonError(.cancelled, "\(what): cancelled", source: source)
                case .other:
                    throw HalcyonError(errors.status, "\(what): \(transportFailure.reason)", permanent: false, source: source)
                }
            }
            if last {
                var final = failure
                final.message += attempt > 1 ? " (after \(attempt) tries)" : ""
                throw final
            }
            guard await Self.pause(backoff(attempt: attempt, retryAfter: retryAfter), cancel: request.cancel) else {
                throw HalcyonError(.cancelled, "\(what): cancelled (\(failure.message), not tried again)", source: source)
            }
        }
    }

    /// One try, on an I/O thread: libcurl's transfer blocks the thread it runs on.
    private func send(_ request: S3Request) async -> Result<S3Response, TransportFailure> {
        let transport = self.transport
        do {
            return try await Blocking.run(.io) { Result { () throws(TransportFailure) -> S3Response in try transport.send(request) } }
        } catch {
            return .failure(TransportFailure(kind: .other, reason: "\(error)"))
        }
    }

    /// Waits `delay` before the next try, holding no thread; false when the calling task is
    /// cancelled or `cancel` is raised first.
    static func pause(_ delay: Duration, cancel: CancellationFlag?) async -> Bool {
        guard let cancel else { return (try? await Task.sleep(for: delay)) != nil }
        let waiting = cancel.child()
        return await withTaskCancellationHandler {
            await waiting.sleep(seconds: delay.seconds)
        } onCancel: {
            waiting.cancel()
        }
    }

    /// The wait after failed try `attempt`: `configuration.retryBackoff`'s (full jitter), at least
    /// the server's `Retry-After` (in seconds) when it sent one, capped too.
    func backoff(attempt: Int, retryAfter: Double?, random: Double = Double.random(in: 0...1)) -> Duration {
        configuration.retryBackoff.delay(afterAttempt: attempt, random: random, retryAfter: Backoff.retryAfter(seconds: retryAfter))
    }

    static func info(_ response: S3Response) -> S3ObjectInfo {
        var metadata: [String: String] = [:]
        for (name, value) in response.headers where name.hasPrefix("x-amz-meta-") {
            metadata[String(name.dropFirst("x-amz-meta-".count))] = value
        }
        return S3ObjectInfo(
            size: response.header("content-length").flatMap { Int($0) } ?? response.body.count, etag: response.header("etag"),
            contentType: response.header("content-type"), metadata: metadata, lastModified: response.header("last-modified").flatMap(parseHTTPDate))
    }

    /// S3's `<Error><Code>…<Message>…<RequestId>…` (any field may be missing; a body that is not
    /// such XML gives nothing).
    static func parseError(_ body: Data) -> (code: String?, message: String?, requestID: String?) {
        guard !body.isEmpty, let root = try? MiniXML.parse(body), root.name == "Error" else { return (nil, nil, nil) }
        func clip(_ s: String?) -> String? { s.map { $0.count > 300 ? String($0.prefix(300)) + "…" : $0 } }
        return (clip(root.value("Code")), clip(root.value("Message")), clip(root.value("RequestId")))
    }

    /// `bytes FIRST-LAST/TOTAL` (a 206's `Content-Range`): the bytes sent and the object's size.
    static func parseContentRange(_ text: String) -> (range: Range<Int>, total: Int)? {
        let t = text.trimmingCharacters(in: .whitespaces)
        guard t.lowercased().hasPrefix("bytes ") else { return nil }
        let parts = t.dropFirst(6).split(separator: "/", maxSplits: 1)
        guard parts.count == 2, let total = Int(parts[1]) else { return nil }
        let ends = parts[0].split(separator: "-", maxSplits: 1)
        guard ends.count == 2, let first = Int(ends[0]), let last = Int(ends[1]), first >= 0, last >= first, last < total else { return nil }
        return (first..<(last + 1), total)
    }

    /// `%XX` decoded, `+` as a space (S3's `encoding-type=url` encodes like a form).
    static func formDecode(_ text: String) -> String {
        var bytes = [UInt8]()
        var it = Array(text.utf8)[...]
        while let b = it.popFirst() {
            if b == UInt8(ascii: "+") {
                bytes.append(0x20)
            } else if b == UInt8(ascii: "%"), it.count >= 2, let v = UInt8(String(decoding: it.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(v)
                it = it.dropFirst(2)
            } else {
                bytes.append(b)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `2009-10-12T17:50:30.000Z` (what S3's XML carries).
    static func parseISO8601(_ text: String) -> Date? {
        let u = Array(text.utf8)
        func num(_ r: Range<Int>) -> Int32? {
            guard r.upperBound <= u.count else { return nil }
            var n: Int32 = 0
            for b in u[r] {
                guard b >= 0x30 && b <= 0x39 else { return nil }
                n = n * 10 + Int32(b - 0x30)
            }
            return n
        }
        guard u.count >= 20, u[4] == 0x2D, u[7] == 0x2D, u[10] == 0x54, u[13] == 0x3A, u[16] == 0x3A, u.last == 0x5A,
            let y = num(0..<4), let mo = num(5..<7), let d = num(8..<10), let h = num(11..<13), let mi = num(14..<16), let s = num(17..<19)
        else { return ISO8601.parse(text) }
        var t = tm()
        t.tm_year = y - 1900
        t.tm_mon = mo - 1
        t.tm_mday = d
        t.tm_hour = h
        t.tm_min = mi
        t.tm_sec = s
        var fraction = 0.0
        if u.count > 21, u[19] == 0x2E, let f = Double("0" + String(decoding: u[19..<(u.count - 1)], as: UTF8.self)) { fraction = f }
        return Date(timeIntervalSince1970: Double(timegm(&t)) + fraction)
    }

    /// `Wed, 12 Oct 2009 17:50:00 GMT`.
    static func parseHTTPDate(_ text: String) -> Date? {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return f.date(from: text)
    }
}
