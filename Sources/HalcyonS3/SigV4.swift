import Foundation
import HalcyonDomain
import HalcyonRuntime

/// AWS Signature Version 4 (`AWS4-HMAC-SHA256`), on libcrypto's SHA-256 and HMAC
/// (`HalcyonCore.Digest`): the canonical request, the string to sign, the signing key, and either
/// an `Authorization` header or a presigned query string.
///
/// Paths are given decoded (an object key as it is, `photos/a b+c.jpg`) and URI-encoded once here,
/// as S3 wants (S3 does not double-encode and does not normalise paths; other services' test
/// vectors ask for `normalizePath`). The query is given decoded too; what is signed is exactly what
/// `encodedQuery` puts on the wire.
public struct SigV4: Sendable {
    public var credentials: S3Credentials
    public var region: String
    public var service: String
    /// Remove `.` and `..` segments and repeated slashes before encoding (RFC 3986). Never for S3,
    /// whose keys may hold them.
    public var normalizePath = false

    /// The payload hash of a request whose body is not signed.
    public static let unsignedPayload = "UNSIGNED-PAYLOAD"
    /// SHA-256 of no bytes: the payload hash of a request without a body.
    public static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    /// The longest a presigned URL may be valid (7 days, S3's limit), and the shortest.
    public static let presignRange: ClosedRange<Int> = 1...604_800

    public init(credentials: S3Credentials, region: String, service: String = "s3") {
        self.credentials = credentials
        self.region = region
        self.service = service
    }

    /// What is signed: the method, the decoded path, the decoded query and the headers sent
    /// (`host` among them).
    public struct Request: Sendable {
        public var method: String
        /// The path, decoded (`/bucket/a b.jpg`); encoded once when signed and sent.
        public var path: String
        /// Query parameters, decoded, in any order (a parameter without a value has `""`).
        public var query: [(name: String, value: String)]
        /// Headers as sent; names in any case. A name given twice is signed as one, values joined by commas.
        public var headers: [(name: String, value: String)]

        public init(method: String, path: String, query: [(name: String, value: String)] = [], headers: [(name: String, value: String)]) {
            self.method = method
            self.path = path
            self.query = query
            self.headers = headers
        }
    }

    /// The result of signing, with the intermediate texts (for tests and for debugging a mismatch
    /// against a server's `CanonicalRequest`; none of them contains the secret key).
    public struct Signature: Sendable {
        /// Headers to add to the request (`Authorization`, `x-amz-date`, …), or empty when presigned.
        public var headers: [(name: String, value: String)]
        /// Query parameters to add (`X-Amz-Algorithm` … `X-Amz-Signature`) when presigned.
        public var query: [(name: String, value: String)]
        public var canonicalRequest: String
        public var stringToSign: String
        /// Lower-case hex.
        public var signature: String
    }

    /// Signs `request` with an `Authorization` header. Adds `x-amz-date`, `x-amz-security-token`
    /// (with a session token) and, with `contentSHA256Header` (S3 requires it), `x-amz-content-sha256`
    /// carrying `payloadHash` (`unsignedPayload` or the body's hex SHA-256) — all signed.
    public func sign(_ request: Request, payloadHash: String, date: Date, contentSHA256Header: Bool = true) -> Signature {
        let stamp = Self.timestamp(date)
        var added: [(name: String, value: String)] = []
        if contentSHA256Header { added.append(("x-amz-content-sha256", payloadHash)) }
        added.append(("x-amz-date", stamp))
        if let token = credentials.sessionToken { added.append(("x-amz-security-token", token)) }
        var signed = request
        signed.headers += added
        let (canonical, signedHeaders) = canonicalRequest(signed, payloadHash: payloadHash)
        let toSign = stringToSign(canonical, timestamp: stamp)
        let signature = Digest.hmacSHA256Hex(key: signingKey(dateStamp: String(stamp.prefix(8))), message: Array(toSign.utf8))
        let authorization =
            "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope(String(stamp.prefix(8)))), "
            + "SignedHeaders=\(signedHeaders), Signature=\(signature)"
        return Signature(
            headers: added + [("Authorization", authorization)], query: [], canonicalRequest: canonical, stringToSign: toSign, signature: signature)
    }

    /// Presigns `request` in its query string (`X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Date`,
    /// `X-Amz-Expires`, `X-Amz-SignedHeaders`, `X-Amz-Security-Token` with a session token, then
    /// `X-Amz-Signature`), valid `expires` seconds from `date`. S3 presigns with
    /// `payloadHash = unsignedPayload`. Throws `job.invalid_options` outside 1 s–7 days.
    public func presign(_ request: Request, date: Date, expires: Int, payloadHash: String = unsignedPayload) throws(HalcyonError) -> Signature {
        guard Self.presignRange.contains(expires) else {
            throw HalcyonError(.invalidOptions, "a presigned URL's expiry must be from 1s to 7d; got \(expires)s")
        }
        let stamp = Self.timestamp(date)
        let signedHeaderNames = Self.canonicalHeaders(request.headers).signed
        var added: [(name: String, value: String)] = [
            ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
            ("X-Amz-Credential", "\(credentials.accessKeyID)/\(scope(String(stamp.prefix(8))))"),
            ("X-Amz-Date", stamp),
            ("X-Amz-Expires", String(expires)),
        ]
        if let token = credentials.sessionToken { added.append(("X-Amz-Security-Token", token)) }
        added.append(("X-Amz-SignedHeaders", signedHeaderNames))
        var signed = request
        signed.query += added
        let (canonical, _) = canonicalRequest(signed, payloadHash: payloadHash)
        let toSign = stringToSign(canonical, timestamp: stamp)
        let signature = Digest.hmacSHA256Hex(key: signingKey(dateStamp: String(stamp.prefix(8))), message: Array(toSign.utf8))
        return Signature(
            headers: [], query: added + [("X-Amz-Signature", signature)], canonicalRequest: canonical, stringToSign: toSign, signature: signature)
    }

    // MARK: The steps

    /// The canonical request and its signed-header list.
    public func canonicalRequest(_ request: Request, payloadHash: String) -> (text: String, signedHeaders: String) {
        let headers = Self.canonicalHeaders(request.headers)
        let text = [
            request.method.uppercased(), canonicalURI(request.path), Self.canonicalQuery(request.query), headers.canonical, headers.signed,
            payloadHash,
        ].joined(separator: "\n")
        return (text, headers.signed)
    }

    /// `AWS4-HMAC-SHA256`, the timestamp, the scope and the canonical request's hash.
    public func stringToSign(_ canonicalRequest: String, timestamp: String) -> String {
        "AWS4-HMAC-SHA256\n\(timestamp)\n\(scope(String(timestamp.prefix(8))))\n\(Digest.sha256Hex(canonicalRequest))"
    }

    /// HMAC chain `AWS4`+secret → date → region → service → `aws4_request`.
    public func signingKey(dateStamp: String) -> [UInt8] {
        var key = Digest.hmacSHA256(key: Array("AWS4\(credentials.secretAccessKey)".utf8), message: Array(dateStamp.utf8))
        for part in [region, service, "aws4_request"] { key = Digest.hmacSHA256(key: key, message: Array(part.utf8)) }
        return key
    }

    func scope(_ dateStamp: String) -> String { "\(dateStamp)/\(region)/\(service)/aws4_request" }

    /// The path URI-encoded once, `/` kept (after removing dot segments with `normalizePath`).
    public func canonicalURI(_ path: String) -> String {
        var p = path.isEmpty ? "/" : path
        if normalizePath { p = Self.removeDotSegments(p) }
        return Self.uriEncode(p, encodeSlash: false)
    }

    /// `name=value` pairs, each side URI-encoded (`/` too), sorted by name then value, joined by `&`.
    public static func canonicalQuery(_ query: [(name: String, value: String)]) -> String {
        query.map { (uriEncode($0.name, encodeSlash: true), uriEncode($0.value, encodeSlash: true)) }
            .sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
            .map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    /// The query as sent: the same encoding as signed (so the server computes the same string).
    public static func encodedQuery(_ query: [(name: String, value: String)]) -> String { canonicalQuery(query) }

    /// Lower-case names sorted, values trimmed with inner runs of spaces collapsed, repeated names
    /// joined by commas; and the `;`-separated list of the names.
    public static func canonicalHeaders(_ headers: [(name: String, value: String)]) -> (canonical: String, signed: String) {
        var byName: [String: [String]] = [:]
        for (name, value) in headers {
            let collapsed = value.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
            byName[name.lowercased(), default: []].append(collapsed)
        }
        let names = byName.keys.sorted()
        let canonical = names.map { "\($0):\(byName[$0]!.joined(separator: ","))\n" }.joined()
        return (canonical, names.joined(separator: ";"))
    }

    /// AWS's URI encoding: every byte of the UTF-8 form except `A–Z a–z 0–9 - _ . ~` (and `/`
    /// unless `encodeSlash`) as `%XX`, upper-case hex. A space is `%20`, `+` is `%2B`.
    public static func uriEncode(_ text: String, encodeSlash: Bool) -> String {
        var out = [UInt8]()
        out.reserveCapacity(text.utf8.count)
        for b in text.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.append(b)
            case UInt8(ascii: "/") where !encodeSlash:
                out.append(b)
            default:
                out.append(UInt8(ascii: "%"))
                out.append(hexDigits[Int(b >> 4)])
                out.append(hexDigits[Int(b & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// `/a/./b/../c//d/` → `/a/c/d/` (RFC 3986 §5.2.4, and empty segments dropped).
    static func removeDotSegments(_ path: String) -> String {
        var out: [Substring] = []
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        for part in parts {
            switch part {
            case "", ".": continue
            case "..": _ = out.popLast()
            default: out.append(part)
            }
        }
        let trailing = path.hasSuffix("/") || path.hasSuffix("/.") || path.hasSuffix("/..")
        let joined = "/" + out.joined(separator: "/")
        return trailing && !out.isEmpty ? joined + "/" : joined
    }

    /// `yyyyMMdd'T'HHmmss'Z'` in UTC.
    public static func timestamp(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970.rounded(.down))
        var tm = tm()
        gmtime_r(&t, &tm)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(tm.tm_year + 1900)\(two(tm.tm_mon + 1))\(two(tm.tm_mday))T\(two(tm.tm_hour))\(two(tm.tm_min))\(two(tm.tm_sec))Z"
    }
}
