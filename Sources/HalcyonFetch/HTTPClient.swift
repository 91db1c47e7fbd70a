internal import CCurl
import Foundation
import HalcyonCurl
import HalcyonDomain
import HalcyonRuntime

/// What a download returned.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var body: Data
    public var contentType: String?
    public var etag: String?
    public var lastModified: String?
    /// `Cache-Control: no-store` was sent.
    public var noStore = false
}

/// Blocking HTTP GETs (and webhook POSTs) through libcurl. Easy handles are pooled: a handle returned to the
/// pool keeps its connection cache, so downloads from the same host reuse connections.
/// Call `get` from a Dispatch thread, never the cooperative pool (`Fetcher` does this).
public struct HTTPClient: Sendable {
    public var configuration: FetchConfiguration
    private let pool = CurlHandlePool(maxIdle: 64)

    public init(configuration: FetchConfiguration) {
        self.configuration = configuration
    }

    /// Fetches `url`. HTTP errors (status ≥ 400) are thrown as `fetch.http_status`, permanent
    /// for 4xx except 408 and 429.
    /// With `revalidating`, the request is conditional (`If-None-Match`, `If-Modified-Since`)
    /// and a 304 comes back as a response with status 304 and no body. `meter` is told of each
    /// chunk of the body as it arrives (and may hold the transfer back).
    public func get(
        _ url: URL, headers: [String: String] = [:], revalidating: CachedOriginal? = nil,
        cancel: CancellationFlag, meter: (any TransferMeter)? = nil
    ) throws(HalcyonError) -> HTTPResponse {
        var requestHeaders = headers
        if let cached = revalidating {
            if let etag = cached.etag { requestHeaders["If-None-Match"] = etag }
            if let modified = cached.lastModified { requestHeaders["If-Modified-Since"] = modified }
        }
        return try perform(url, body: nil, headers: requestHeaders, maxBytes: configuration.maxBytes, cancel: cancel, meter: meter)
    }

    /// POSTs `body` to `url` (a webhook) under the same address policy and timeouts as
    /// downloads, following no redirects (a 3xx answer is returned as it is) and reading at most
    /// `maxResponseBytes` of the answer. Status ≥ 400 is thrown as for `get`.
    public func post(
        _ url: URL, body: Data, headers: [String: String], maxResponseBytes: Int = 64 << 10, cancel: CancellationFlag
    ) throws(HalcyonError) -> HTTPResponse {
        try perform(url, body: body, headers: headers, maxBytes: maxResponseBytes, cancel: cancel)
    }

    /// One transfer: a GET, or with `body` a POST.
    private func perform(
        _ url: URL, body: Data?, headers requestHeaders: [String: String], maxBytes: Int, cancel: CancellationFlag,
        meter: (any TransferMeter)? = nil
    ) throws(HalcyonError) -> HTTPResponse {
        let source = url.absoluteString
        guard let handle = pool.take() else { throw HalcyonError(.internal, "curl_easy_init failed", source: source) }
        defer { pool.give(handle) }
        let settings = configuration
        let sink = BodySink(
            limit: maxBytes, cancel: cancel, policy: settings.addressPolicy, meter: meter, handle: handle,
            deadlines: TransferDeadlines(total: settings.totalTimeout, lowSpeedBytes: settings.lowSpeedBytes, lowSpeedTime: settings.lowSpeedTime))
        let sinkPointer = Unmanaged.passRetained(sink)
        defer { sinkPointer.release() }

        var list: UnsafeMutablePointer<curl_slist>? = nil
        for (name, value) in requestHeaders.sorted(by: { $0.key < $1.key }) {
            list = curl_slist_append(list, "\(name): \(value)")
        }
        defer { curl_slist_free_all(list) }

        hc_setopt_string(handle, CURLOPT_URL, source)
        // No proxy, whatever http_proxy/HTTPS_PROXY/ALL_PROXY say: through a proxy the SSRF
        // guard would judge the proxy's address, not the origin's (an empty string is
        // libcurl's way to turn the environment's proxies off).
        hc_setopt_string(handle, CURLOPT_PROXY, "")
        hc_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")
        hc_setopt_string(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        if let body {
            hc_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
            // COPYPOSTFIELDS: libcurl keeps its own copy for the transfer.
            if body.isEmpty {
                hc_setopt_string(handle, CURLOPT_COPYPOSTFIELDS, "")
            } else {
                _ = body.withUnsafeBytes { hc_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: $0.baseAddress!)) }
            }
        } else {
            hc_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 1)
            hc_setopt_long(handle, CURLOPT_MAXREDIRS, settings.maxRedirects)
        }
        // The whole transfer's limit and the low-speed abort are kept by the progress callback
        // (`TransferDeadlines`), not by libcurl, whose clocks would count the time the meter
        // holds the transfer back. Connecting is bounded here, by the shorter of the two limits.
        hc_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(min(settings.connectTimeout, settings.totalTimeout).seconds))
        hc_setopt_off(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(maxBytes))
        hc_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        hc_setopt_string(handle, CURLOPT_USERAGENT, settings.userAgent)
        hc_setopt_string(handle, CURLOPT_ACCEPT_ENCODING, "")
        if list != nil { hc_setopt_slist(handle, CURLOPT_HTTPHEADER, list) }
        hc_setopt_pointer(handle, CURLOPT_WRITEDATA, sinkPointer.toOpaque())
        hc_setopt_write(handle, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            let sink = Unmanaged<BodySink>.fromOpaque(context!).takeUnretainedValue()
            let n = size * count
            return sink.append(UnsafeRawBufferPointer(start: data, count: n)) ? n : 0
        }
        // The SSRF guard: every connection's resolved address, redirects included, is checked
        // before a socket is even opened.
        hc_setopt_pointer(handle, CURLOPT_OPENSOCKETDATA, sinkPointer.toOpaque())
        hc_setopt_opensocket(handle) { context, purpose, address in
            let sink = Unmanaged<BodySink>.fromOpaque(context!).takeUnretainedValue()
            guard let address else { return CURL_SOCKET_BAD }
            let a = address.pointee
            // The address is read where libcurl keeps it — `addr` is the start of a whole
            // sockaddr_storage, `addrlen` bytes long — never from a copy of the 16-byte
            // `struct sockaddr` field, which an IPv6 address (28 bytes) overruns.
            let field = UnsafeRawPointer(address) + MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr)!
            guard let ip = IPAddress(socketAddress: field, length: Int(a.addrlen)),
                a.family == AF_INET || a.family == AF_INET6,
                Int32(field.loadUnaligned(fromByteOffset: MemoryLayout<sockaddr>.offset(of: \sockaddr.sa_family)!, as: sa_family_t.self))
                    == a.family
            else {
                sink.refusal = "unsupported address family \(a.family)"
                return CURL_SOCKET_BAD
            }
            if let refusal = sink.policy.refusal(for: ip) {
                sink.refusal = refusal
                return CURL_SOCKET_BAD
            }
            return socket(a.family, a.socktype | Int32(SOCK_CLOEXEC.rawValue), a.protocol)
        }
        hc_setopt_long(handle, CURLOPT_NOPROGRESS, 0)
        hc_setopt_pointer(handle, CURLOPT_XFERINFODATA, sinkPointer.toOpaque())
        hc_setopt_xferinfo(handle) { context, _, _, _, _ in
            Unmanaged<BodySink>.fromOpaque(context!).takeUnretainedValue().progress() ? 0 : 1
        }

        let code = curl_easy_perform(handle)
        var status = 0
        hc_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        var typePointer: UnsafeMutablePointer<CChar>? = nil
        hc_getinfo_string(handle, CURLINFO_CONTENT_TYPE, &typePointer)
        let contentType = typePointer.map { String(cString: $0) }

        guard code == CURLE_OK else {
            throw Self.error(for: code, sink: sink, source: source, limit: maxBytes)
        }
        if status >= 400 {
            let transient = status == 408 || status == 429 || status >= 500
            var error = HalcyonError(.httpStatus, "HTTP \(status) from \(url.host ?? source)", permanent: !transient, source: source)
            error.httpStatus = status
            error.retryAfter = Self.header(handle, "Retry-After").flatMap { RetryAfter.seconds($0) }
            throw error
        }
        let cacheControl = Self.header(handle, "Cache-Control")?.lowercased() ?? ""
        return HTTPResponse(
            status: status, body: sink.data, contentType: contentType,
            etag: Self.header(handle, "ETag"), lastModified: Self.header(handle, "Last-Modified"),
            noStore: cacheControl.contains("no-store"))
    }

    /// Seconds as libcurl's milliseconds, saturated (a configuration can hold any Double).
    static func milliseconds(_ seconds: Double) -> Int {
        guard seconds.isFinite, seconds > 0 else { return seconds > 0 ? Int(Int32.max) : 1 }
        return Int(min(seconds * 1000, Double(Int32.max)).rounded(.up))
    }

    /// The last value of response header `name`, if present.
    private static func header(_ handle: OpaquePointer, _ name: String) -> String? {
        var h: UnsafeMutablePointer<curl_header>?
        guard curl_easy_header(handle, name, 0, UInt32(CURLH_HEADER), -1, &h) == CURLHE_OK, let value = h?.pointee.value else { return nil }
        return String(cString: value)
    }

    private static func error(for code: CURLcode, sink: BodySink, source: String, limit: Int) -> HalcyonError {
        let reason = String(cString: curl_easy_strerror(code))
        if let refusal = sink.refusal {
            return HalcyonError(.blockedAddress, "refused to connect: \(refusal)", source: source)
        }
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            return HalcyonError(.timeout, "timed out: \(reason)", source: source)
        case CURLE_ABORTED_BY_CALLBACK where sink.timedOut != nil:
            return HalcyonError(.timeout, "timed out: \(sink.timedOut ?? reason)", source: source)
        case CURLE_TOO_MANY_REDIRECTS:
            return HalcyonError(.tooManyRedirects, reason, source: source)
        case CURLE_FILESIZE_EXCEEDED:
            return HalcyonError(.tooLarge, "body exceeds \(limit) bytes", source: source)
        case CURLE_WRITE_ERROR where sink.overflowed:
            return HalcyonError(.tooLarge, "body exceeds \(limit) bytes", source: source)
        case CURLE_ABORTED_BY_CALLBACK:
            return HalcyonError(.cancelled, "download cancelled", source: source)
        case CURLE_WRITE_ERROR where sink.cancel.isCancelled:
            return HalcyonError(.cancelled, "download cancelled", source: source)
        case CURLE_UNSUPPORTED_PROTOCOL:
            return HalcyonError(.blockedAddress, "redirected to a protocol other than http/https", source: source)
        case CURLE_URL_MALFORMAT:
            return HalcyonError(.invalidSource, reason, source: source)
        default:
            return HalcyonError(.connection, reason, source: source)
        }
    }
}

/// Per-transfer state shared with libcurl's callbacks: the body up to a byte limit, the
/// cancellation flag, the address policy, the meter, the time limits (counted without the time
/// the meter held the transfer back) and why a connection was refused or the transfer timed
/// out. Owned by one transfer on one thread.
private final class BodySink {
    var data = Data()
    var overflowed = false
    var refusal: String?
    /// Why the progress callback stopped the transfer for time (`fetch.timeout`).
    var timedOut: String?
    let limit: Int
    let cancel: CancellationFlag
    let policy: AddressPolicy
    let meter: (any TransferMeter)?
    /// The transfer's handle, to ask libcurl whether the request is under way.
    let handle: OpaquePointer
    var deadlines: TransferDeadlines
    private var underWay = false

    init(
        limit: Int, cancel: CancellationFlag, policy: AddressPolicy, meter: (any TransferMeter)?, handle: OpaquePointer,
        deadlines: TransferDeadlines
    ) {
        self.limit = limit
        self.cancel = cancel
        self.policy = policy
        self.meter = meter
        self.handle = handle
        self.deadlines = deadlines
    }

    /// False stops the transfer: over the limit, or cancelled (also while the meter held it).
    /// The time the meter holds it back is taken off its clocks.
    func append(_ chunk: UnsafeRawBufferPointer) -> Bool {
        if cancel.isCancelled { return false }
        if data.count + chunk.count > limit {
            overflowed = true
            return false
        }
        if let meter {
            let asked = ContinuousClock.now
            let goOn = meter.received(chunk.count)
            deadlines.heldBack(for: ContinuousClock.now - asked)
            if !goOn { return false }
        }
        data.append(contentsOf: chunk)
        return true
    }

    /// libcurl's progress callback: false stops the transfer — cancelled, or past a time limit
    /// (`timedOut` says which).
    func progress() -> Bool {
        if cancel.isCancelled { return false }
        if !underWay {
            // The request has been sent once libcurl records the time before the transfer.
            var sent: curl_off_t = 0
            underWay = hc_getinfo_off(handle, CURLINFO_PRETRANSFER_TIME_T, &sent) == CURLE_OK && sent > 0
        }
        if let reason = deadlines.check(bytes: data.count, underWay: underWay) {
            timedOut = reason
            return false
        }
        return true
    }
}

/// `Retry-After`: delay-seconds or an HTTP date.
enum RetryAfter {
    static func seconds(_ value: String, now: Date = Date()) -> Double? {
        let v = value.trimmingCharacters(in: .whitespaces)
        if let n = Double(v), n.isFinite, n >= 0 { return n }
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = f.date(from: v) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}
