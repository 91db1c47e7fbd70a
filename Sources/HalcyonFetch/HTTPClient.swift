internal import CCurl
import Foundation
import HalcyonCore

/// What a download returned.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var body: Data
    public var contentType: String?
}

/// Blocking HTTP GETs through libcurl, one easy handle per transfer. Call `get` from a
/// Dispatch thread, never the cooperative pool (`Fetcher` does this).
public struct HTTPClient: Sendable {
    public var configuration: FetchConfiguration

    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_ALL)) }()

    public init(configuration: FetchConfiguration) {
        _ = Self.globalInit
        self.configuration = configuration
    }

    /// Fetches `url`. HTTP errors (status ≥ 400) are thrown as `fetch.http_status`, permanent
    /// for 4xx except 408 and 429.
    public func get(_ url: URL, headers: [String: String] = [:], cancel: CancellationFlag) throws(HalcyonError) -> HTTPResponse {
        let source = url.absoluteString
        guard let handle = curl_easy_init() else { throw HalcyonError(.internal, "curl_easy_init failed", source: source) }
        defer { curl_easy_cleanup(handle) }
        let sink = BodySink(limit: configuration.maxBytes, cancel: cancel)
        let sinkPointer = Unmanaged.passRetained(sink)
        defer { sinkPointer.release() }

        var list: UnsafeMutablePointer<curl_slist>? = nil
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            list = curl_slist_append(list, "\(name): \(value)")
        }
        defer { curl_slist_free_all(list) }

        let c = configuration
        hc_setopt_string(handle, CURLOPT_URL, source)
        hc_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")
        hc_setopt_string(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        hc_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 1)
        hc_setopt_long(handle, CURLOPT_MAXREDIRS, c.maxRedirects)
        hc_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Int(c.connectTimeout * 1000))
        hc_setopt_long(handle, CURLOPT_TIMEOUT_MS, Int(c.totalTimeout * 1000))
        hc_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, c.lowSpeedBytes)
        hc_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, c.lowSpeedSeconds)
        hc_setopt_off(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(c.maxBytes))
        hc_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        hc_setopt_string(handle, CURLOPT_USERAGENT, c.userAgent)
        hc_setopt_string(handle, CURLOPT_ACCEPT_ENCODING, "")
        if list != nil { hc_setopt_slist(handle, CURLOPT_HTTPHEADER, list) }
        hc_setopt_pointer(handle, CURLOPT_WRITEDATA, sinkPointer.toOpaque())
        hc_setopt_write(handle, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            let sink = Unmanaged<BodySink>.fromOpaque(context!).takeUnretainedValue()
            let n = size * count
            return sink.append(UnsafeRawBufferPointer(start: data, count: n)) ? n : 0
        }
        hc_setopt_long(handle, CURLOPT_NOPROGRESS, 0)
        hc_setopt_pointer(handle, CURLOPT_XFERINFODATA, sinkPointer.toOpaque())
        hc_setopt_xferinfo(handle) { context, _, _, _, _ in
            Unmanaged<BodySink>.fromOpaque(context!).takeUnretainedValue().cancel.isCancelled ? 1 : 0
        }

        let code = curl_easy_perform(handle)
        var status = 0
        hc_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        var typePointer: UnsafeMutablePointer<CChar>? = nil
        hc_getinfo_string(handle, CURLINFO_CONTENT_TYPE, &typePointer)
        let contentType = typePointer.map { String(cString: $0) }

        guard code == CURLE_OK else {
            throw Self.error(for: code, sink: sink, source: source, limit: c.maxBytes)
        }
        if status >= 400 {
            let transient = status == 408 || status == 429 || status >= 500
            throw HalcyonError(.httpStatus, "HTTP \(status) from \(url.host ?? source)", permanent: !transient, source: source)
        }
        return HTTPResponse(status: status, body: sink.data, contentType: contentType)
    }

    private static func error(for code: CURLcode, sink: BodySink, source: String, limit: Int) -> HalcyonError {
        let reason = String(cString: curl_easy_strerror(code))
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            return HalcyonError(.timeout, "timed out: \(reason)", source: source)
        case CURLE_TOO_MANY_REDIRECTS:
            return HalcyonError(.tooManyRedirects, reason, source: source)
        case CURLE_FILESIZE_EXCEEDED:
            return HalcyonError(.tooLarge, "body exceeds \(limit) bytes", source: source)
        case CURLE_WRITE_ERROR where sink.overflowed:
            return HalcyonError(.tooLarge, "body exceeds \(limit) bytes", source: source)
        case CURLE_ABORTED_BY_CALLBACK:
            return HalcyonError(.internal, "download cancelled", source: source)
        case CURLE_WRITE_ERROR where sink.cancel.isCancelled:
            return HalcyonError(.internal, "download cancelled", source: source)
        case CURLE_UNSUPPORTED_PROTOCOL:
            return HalcyonError(.blockedAddress, "redirected to a protocol other than http/https", source: source)
        case CURLE_URL_MALFORMAT:
            return HalcyonError(.invalidSource, reason, source: source)
        default:
            return HalcyonError(.connection, reason, source: source)
        }
    }
}

/// Accumulates a body up to a byte limit; owned by one transfer on one thread.
private final class BodySink {
    var data = Data()
    var overflowed = false
    let limit: Int
    let cancel: CancellationFlag

    init(limit: Int, cancel: CancellationFlag) {
        self.limit = limit
        self.cancel = cancel
    }

    /// False stops the transfer: over the limit, or cancelled.
    func append(_ chunk: UnsafeRawBufferPointer) -> Bool {
        if cancel.isCancelled { return false }
        if data.count + chunk.count > limit {
            overflowed = true
            return false
        }
        data.append(contentsOf: chunk)
        return true
    }
}
