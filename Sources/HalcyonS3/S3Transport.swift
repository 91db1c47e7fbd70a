internal import CCurl
import Foundation
import HalcyonCurl
import HalcyonRuntime
import Synchronization

/// One S3 request as sent: method, the full object key (or nil for the bucket), query, headers and body.
struct S3Request: Sendable {
    var method: String
    var key: String?
    var query: [(name: String, value: String)] = []
    var headers: [(name: String, value: String)] = []
    var body: Data?
    /// Largest 2xx body accepted (Content-Length checked first, then a running count).
    var maxBody: Int
    /// Raised: the transfer stops at its next progress callback or chunk (`TransportFailure.cancelled`).
    var cancel: CancellationFlag?
    /// Told of each chunk of the body as it arrives (and may hold the transfer back).
    var meter: (any TransferMeter)?
    /// HEAD: no body is read, Content-Length is the object's size.
    var isHead: Bool { method == "HEAD" }
    /// A ranged GET: its body (at most `maxBody`) is allocated once, at its declared length.
    var isRanged: Bool { method == "GET" && headers.contains { $0.name == "range" } }
}

/// One answer: status, headers (names lower-cased, in order), body.
struct S3Response: Sendable {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: Data

    func header(_ name: String) -> String? { headers.last { $0.name == name }?.value }
}

/// Why a transfer did not produce an answer.
struct TransportFailure: Error, Sendable {
    enum Kind: Sendable { case timeout, connection, tooLarge(Int), cancelled, other }
    var kind: Kind
    var reason: String
}

/// Blocking transfers through pooled libcurl easy handles (as `HTTPClient` does): signs each
/// request (SigV4) with the configuration's credentials, sends it, collects status, headers and a
/// bounded body.
final class S3Transport: Sendable {
    let configuration: S3Configuration
    private let pool = CurlHandlePool(maxIdle: 32)
    /// Requests sent so far (each try counts).
    let sent = Atomic<Int>(0)

    /// Largest error body read (an S3 `<Error>` document is a few hundred bytes).
    static let maxErrorBody = 64 << 10

    init(configuration: S3Configuration) {
        self.configuration = configuration
    }

    /// Scheme, host header and path of the request for `key` (nil: the bucket itself).
    func location(key: String?) -> (base: String, host: String, path: String) {
        let endpoint = configuration.resolvedEndpoint
        let scheme = endpoint.scheme?.lowercased() ?? "https"
        var host = endpoint.host ?? ""
        if host.contains(":") && !host.hasPrefix("[") { host = "[\(host)]" }
        if !configuration.usesPathStyle { host = "\(configuration.bucket).\(host)" }
        let hostHeader = endpoint.port.map { "\(host):\($0)" } ?? host
        var path = configuration.usesPathStyle ? "/\(configuration.bucket)" : ""
        if let key { path += "/" + key } else if path.isEmpty { path = "/" }
        return ("\(scheme)://\(hostHeader)", hostHeader, path)
    }

    /// Signs and sends one request; no retry here.
    func send(_ request: S3Request, date: Date = Date()) throws(TransportFailure) -> S3Response {
        sent.add(1, ordering: .relaxed)
        let (base, host, path) = location(key: request.key)
        var headers = request.headers
        headers.append(("host", host))
        if let credentials = configuration.credentials {
            let payloadHash: String
            if let body = request.body, !body.isEmpty {
                payloadHash = configuration.signPayload ? Digest.sha256Hex(body) : SigV4.unsignedPayload
            } else {
                payloadHash = SigV4.emptyPayloadHash
            }
            let signer = SigV4(credentials: credentials, region: configuration.region)
            let signature = signer.sign(
                SigV4.Request(method: request.method, path: path, query: request.query, headers: headers), payloadHash: payloadHash, date: date)
            headers += signature.headers
        }
        let query = request.query.isEmpty ? "" : "?" + SigV4.encodedQuery(request.query)
        let url = base + SigV4.uriEncode(path, encodeSlash: false) + query
        return try perform(url: url, request: request, headers: headers)
    }

    private func perform(url: String, request: S3Request, headers: [(name: String, value: String)]) throws(TransportFailure) -> S3Response {
        guard let handle = pool.take() else { throw TransportFailure(kind: .other, reason: "curl_easy_init failed") }
        defer { pool.give(handle) }
        let sink = ExchangeSink(
            limit: request.isHead ? Int.max : request.maxBody, errorLimit: Self.maxErrorBody, cancel: request.cancel,
            meter: request.meter, reserve: request.isRanged)
        let sinkPointer = Unmanaged.passRetained(sink)
        defer { sinkPointer.release() }

        var list: UnsafeMutablePointer<curl_slist>? = nil
        for (name, value) in headers { list = curl_slist_append(list, "\(name): \(value)") }
        // No `Expect: 100-continue` round trip for bodies over 1 MiB.
        list = curl_slist_append(list, "Expect:")
        defer { curl_slist_free_all(list) }

        let c = configuration
        hc_setopt_string(handle, CURLOPT_URL, url)
        // The path exactly as signed: no squashing of `.`/`..` segments a key may hold.
        hc_setopt_long(handle, CURLOPT_PATH_AS_IS, 1)
        // No proxy from the environment: the endpoint is the operator's choice.
        hc_setopt_string(handle, CURLOPT_PROXY, "")
        hc_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")
        hc_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0)
        hc_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        if request.meter == nil {
            hc_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(c.connectTimeout))
            hc_setopt_long(handle, CURLOPT_TIMEOUT_MS, Self.milliseconds(c.requestTimeout))
        } else {
            // A metered read may be held back by its meter: its request timeout is kept by the
            // progress callback on the time it runs (`TransferDeadlines`), not by libcurl, which
            // would count the pause; connecting stays bounded here.
            hc_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(min(c.connectTimeout, c.requestTimeout)))
            sink.deadlines = TransferDeadlines(total: c.requestTimeout, lowSpeedBytes: 0, lowSpeedTime: .zero)
        }
        hc_setopt_string(handle, CURLOPT_USERAGENT, c.userAgent)
        hc_setopt_slist(handle, CURLOPT_HTTPHEADER, list)
        switch request.method {
        case "GET": break
        case "HEAD": hc_setopt_long(handle, CURLOPT_NOBODY, 1)
        default: hc_setopt_string(handle, CURLOPT_CUSTOMREQUEST, request.method)
        }
        hc_setopt_pointer(handle, CURLOPT_WRITEDATA, sinkPointer.toOpaque())
        hc_setopt_write(handle, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            let n = size * count
            return Unmanaged<ExchangeSink>.fromOpaque(context!).takeUnretainedValue().append(UnsafeRawBufferPointer(start: data, count: n)) ? n : 0
        }
        hc_setopt_pointer(handle, CURLOPT_HEADERDATA, sinkPointer.toOpaque())
        hc_setopt_write(handle, CURLOPT_HEADERFUNCTION) { data, size, count, context in
            let n = size * count
            return Unmanaged<ExchangeSink>.fromOpaque(context!).takeUnretainedValue().header(UnsafeRawBufferPointer(start: data, count: n)) ? n : 0
        }

        if request.cancel != nil || sink.deadlines != nil {
            hc_setopt_long(handle, CURLOPT_NOPROGRESS, 0)
            hc_setopt_pointer(handle, CURLOPT_XFERINFODATA, sinkPointer.toOpaque())
            hc_setopt_xferinfo(handle) { context, _, _, _, _ in
                Unmanaged<ExchangeSink>.fromOpaque(context!).takeUnretainedValue().progress() ? 0 : 1
            }
        }

        let code: CURLcode
        if let body = request.body, !body.isEmpty {
            hc_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
            // POSTFIELDS borrows the bytes: they stay alive until the transfer ends.
            code = body.withUnsafeBytes { raw in
                hc_setopt_pointer(handle, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: raw.baseAddress!))
                return curl_easy_perform(handle)
            }
        } else {
            if request.method == "PUT" || request.method == "POST" {
                hc_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, 0)
                hc_setopt_string(handle, CURLOPT_COPYPOSTFIELDS, "")
            }
            code = curl_easy_perform(handle)
        }
        if code != CURLE_OK {
            let reason = String(cString: curl_easy_strerror(code))
            if request.cancel?.isCancelled == true { throw TransportFailure(kind: .cancelled, reason: reason) }
            if let timedOut = sink.timedOut { throw TransportFailure(kind: .timeout, reason: timedOut) }
            if sink.overflowed && (200..<300).contains(sink.status) {
                throw TransportFailure(kind: .tooLarge(sink.declaredLength ?? sink.body.count), reason: reason)
            }
            if sink.overflowed { throw TransportFailure(kind: .other, reason: "HTTP \(sink.status) with an answer over \(Self.maxErrorBody) bytes") }
            switch code {
            case CURLE_OPERATION_TIMEDOUT: throw TransportFailure(kind: .timeout, reason: reason)
            case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING,
                CURLE_PARTIAL_FILE, CURLE_SSL_CONNECT_ERROR:
                throw TransportFailure(kind: .connection, reason: reason)
            default: throw TransportFailure(kind: .other, reason: reason)
            }
        }
        return S3Response(status: sink.status, headers: sink.headers, body: sink.body)
    }

    static func milliseconds(_ d: Duration) -> Int {
        Int(min(max(d.nanoseconds / 1_000_000, 1), Int64(Int32.max)))
    }
}

/// One transfer's answer as libcurl delivers it: the status line and headers of the final
/// response (an interim `100 Continue` is dropped), and the body up to its bound.
private final class ExchangeSink {
    var status = 0
    var headers: [(name: String, value: String)] = []
    var body = Data()
    var overflowed = false
    var declaredLength: Int?
    let limit: Int
    let errorLimit: Int
    let cancel: CancellationFlag?
    let meter: (any TransferMeter)?
    /// Allocate a declared body (within the bound) at once.
    let reserve: Bool
    /// A metered read's time limit, counted without the time its meter held it back; nil when
    /// libcurl keeps the request timeout itself.
    var deadlines: TransferDeadlines?
    /// Why the progress callback stopped the transfer for time.
    var timedOut: String?

    init(limit: Int, errorLimit: Int, cancel: CancellationFlag?, meter: (any TransferMeter)? = nil, reserve: Bool = false) {
        self.meter = meter
        self.limit = limit
        self.errorLimit = errorLimit
        self.cancel = cancel
        self.reserve = reserve
    }

    private var bound: Int { (200..<300).contains(status) ? limit : errorLimit }

    /// False stops the transfer (a declared length over the bound).
    func header(_ raw: UnsafeRawBufferPointer) -> Bool {
        // Bytes, not Characters: "\r\n" is one Character in Swift.
        var end = raw.count
        while end > 0, raw[end - 1] == 0x0A || raw[end - 1] == 0x0D { end -= 1 }
        let line = String(decoding: UnsafeRawBufferPointer(rebasing: raw[0..<end]), as: UTF8.self)
        if line.hasPrefix("HTTP/") {
            let parts = line.split(separator: " ")
            status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            headers.removeAll()
            declaredLength = nil
            return true
        }
        guard let colon = line.firstIndex(of: ":") else { return true }
        let name = line[..<colon].lowercased()
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        headers.append((name, value))
        if name == "content-length", let n = Int(value) {
            declaredLength = n
            if n > bound && limit != Int.max {
                overflowed = true
                return false
            }
            // A ranged read's body in one allocation of its size, not grown by doubling.
            if reserve && n <= bound { body.reserveCapacity(n) }
        }
        return true
    }

    /// False stops the transfer: the body went past its bound, or the request was cancelled.
    func append(_ chunk: UnsafeRawBufferPointer) -> Bool {
        if cancel?.isCancelled == true { return false }
        if body.count + chunk.count > bound {
            overflowed = true
            return false
        }
        if let meter {
            let asked = ContinuousClock.now
            let goOn = meter.received(chunk.count)
            deadlines?.heldBack(for: ContinuousClock.now - asked)
            if !goOn { return false }
        }
        body.append(contentsOf: chunk)
        return true
    }

    /// libcurl's progress callback: false stops the transfer — cancelled, or past its time limit
    /// (`timedOut` says so).
    func progress() -> Bool {
        if cancel?.isCancelled == true { return false }
        if let reason = deadlines?.check(bytes: body.count, underWay: true) {
            timedOut = reason
            return false
        }
        return true
    }
}
