import Foundation
import HalcyonDomain
import HalcyonRuntime

/// An access key pair and an optional session token. Never printed: `description`,
/// `debugDescription` and its mirror (what `dump` and reflection print) say only which parts are
/// set, so a configuration or an error that carries credentials cannot leak them into a log.
public struct S3Credentials: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var accessKeyID: String
    public var secretAccessKey: String
    /// `AWS_SESSION_TOKEN`: temporary credentials' token, sent as `x-amz-security-token`.
    public var sessionToken: String?

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    /// From `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`; nil unless both keys are set.
    public static func from(environment: [String: String]) -> S3Credentials? {
        guard let id = nonEmpty(environment["AWS_ACCESS_KEY_ID"]), let secret = nonEmpty(environment["AWS_SECRET_ACCESS_KEY"]) else { return nil }
        return S3Credentials(accessKeyID: id, secretAccessKey: secret, sessionToken: nonEmpty(environment["AWS_SESSION_TOKEN"]))
    }

    public var description: String { sessionToken == nil ? "S3Credentials(redacted)" : "S3Credentials(redacted, with session token)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["redacted": true, "sessionToken": sessionToken != nil]) }
}

/// Where and how to reach one S3 bucket (or a prefix of it), and the client's limits. Defaults
/// follow the AWS SDKs' conventions; each limit a command line may expose is described once in
/// `Settings`.
///
/// `init(url:environment:)` reads `s3://BUCKET[/PREFIX]` and the AWS variables:
/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`; `AWS_REGION`, else
/// `AWS_DEFAULT_REGION`, else `us-east-1`; `AWS_ENDPOINT_URL_S3`, else `AWS_ENDPOINT_URL`, else
/// AWS's `https://s3.REGION.amazonaws.com`; and `HALCYON_S3_PATH_STYLE` (`1`/`true` or `0`/`false`).
public struct S3Configuration: Sendable, CustomStringConvertible {
    /// The bucket: 3–63 characters of `a–z 0–9 . -`, starting and ending with a letter or digit.
    public var bucket: String
    /// Key prefix every key is under: empty, or ends with `/` (`s3://b/images` → `images/`).
    public var prefix: String = ""
    /// Signing region. Default `us-east-1`.
    public var region: String = "us-east-1"
    /// The S3 endpoint (`http(s)://host[:port]`), nil for AWS's own (`https://s3.REGION.amazonaws.com`).
    public var endpoint: URL?
    /// Path-style (`endpoint/bucket/key`) or virtual-hosted (`bucket.endpoint/key`) addressing;
    /// nil (default) decides: path-style when the endpoint's host is an IP address or `localhost`,
    /// or when the bucket name has a dot (a TLS wildcard certificate would not cover it).
    public var pathStyle: Bool?
    /// Nil: requests go unsigned (a public bucket).
    public var credentials: S3Credentials?
    /// Time to establish a connection. Default: `Settings.connectTimeout`.
    public var connectTimeout: Duration = Settings.connectTimeout.defaultValue
    /// Time for one whole request, body included. Default: `Settings.requestTimeout`.
    public var requestTimeout: Duration = Settings.requestTimeout.defaultValue
    /// Tries per request (the first included) for failures that can pass: 5xx, 429, `SlowDown`,
    /// connection errors and timeouts. Default: `Settings.maxAttempts`.
    public var maxAttempts: Int = Settings.maxAttempts.defaultValue
    /// The first retry waits up to this (full jitter), doubling per retry up to `maxRetryDelay`.
    /// Default: `Settings.retryBaseDelay`.
    public var retryBaseDelay: Duration = Settings.retryBaseDelay.defaultValue
    /// The longest wait between tries.
    public var maxRetryDelay: Duration = .seconds(5)
    /// The waits between tries: random up to `retryBaseDelay` doubling per retry, capped at
    /// `maxRetryDelay` (full jitter).
    public var retryBackoff: Backoff { Backoff(base: retryBaseDelay, maximum: maxRetryDelay, jitter: .full) }
    /// Largest XML answer read (a list page, an error): 1,000 keys of up to 1,024 bytes each,
    /// URL-encoded, fit.
    public var maxXMLBytes: Int = 8 << 20
    /// Whether a PUT signs its body's SHA-256 (`x-amz-content-sha256`: the server checks the bytes
    /// arrived intact) or sends `UNSIGNED-PAYLOAD`. Default true.
    public var signPayload = true
    public var userAgent = "Halcyon/\(HalcyonVersion.string) (S3 client)"

    /// Longest object key, in UTF-8 bytes (S3's limit).
    public static let maxKeyBytes = 1024
    /// Most user metadata per object: names and values, UTF-8 bytes (S3's limit for `x-amz-meta-*`).
    public static let maxMetadataBytes = 2048

    public init(bucket: String, prefix: String = "") {
        self.bucket = bucket
        self.prefix = Self.normalizedPrefix(prefix)
    }

    /// The settings a command line may expose for the S3 client.
    public enum Settings {
        public static let connectTimeout = Setting.duration(
            "--s3-connect-timeout", default: .seconds(5), .milliseconds(100)...(.minutes(10)), "Time to connect to the S3 endpoint")
        public static let requestTimeout = Setting.duration(
            "--s3-timeout", default: .seconds(120), .seconds(1)...(.days(1)), "Time for one whole S3 request, body included")
        public static let maxAttempts = Setting.count(
            "--s3-attempts", default: 4, 1...20, "Tries per S3 request (5xx, 429, SlowDown, connection errors and timeouts are retried)")
        public static let retryBaseDelay = Setting.duration(
            "--s3-retry-delay", default: .milliseconds(100), .zero...(.minutes(1)),
            "Most the first S3 retry waits (random below it), doubling per retry")
    }

    /// `s3://BUCKET[/PREFIX]` and the AWS variables of `environment` (see the type's description).
    /// Throws `job.invalid_options` naming what is wrong (never a credential).
    public init(url: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(HalcyonError) {
        let (bucket, prefix) = try Self.parse(url)
        self.init(bucket: bucket, prefix: prefix)
        credentials = S3Credentials.from(environment: environment)
        region = nonEmpty(environment["AWS_REGION"]) ?? nonEmpty(environment["AWS_DEFAULT_REGION"]) ?? "us-east-1"
        if let text = nonEmpty(environment["AWS_ENDPOINT_URL_S3"]) ?? nonEmpty(environment["AWS_ENDPOINT_URL"]) {
            guard let url = URL(string: text) else { throw HalcyonError(.invalidOptions, "the S3 endpoint is not a URL: \(Redaction.url(text))") }
            endpoint = url
        }
        switch environment["HALCYON_S3_PATH_STYLE"]?.lowercased() {
        case "1", "true", "yes": pathStyle = true
        case "0", "false", "no": pathStyle = false
        case nil, "": break
        case let other?: throw HalcyonError(.invalidOptions, "HALCYON_S3_PATH_STYLE must be 1 or 0; got \(other)")
        }
        try validate()
    }

    /// Splits `s3://BUCKET[/PREFIX]` into the bucket and the normalised prefix (ending with `/`).
    /// Split at the first `/` byte (not `Character`: a joining character can swallow a `/`).
    public static func parse(_ url: String) throws(HalcyonError) -> (bucket: String, prefix: String) {
        guard url.hasPrefix("s3://") else { throw HalcyonError(.invalidOptions, "an S3 location is s3://BUCKET[/PREFIX]; got \(url)") }
        let rest = url.utf8.dropFirst(5)
        let slash = rest.firstIndex(of: UInt8(ascii: "/"))
        let bucket = String(decoding: rest[..<(slash ?? rest.endIndex)], as: UTF8.self)
        let prefix = slash.map { String(decoding: rest[rest.index(after: $0)...], as: UTF8.self) } ?? ""
        try checkBucket(bucket)
        let normalized = normalizedPrefix(prefix)
        try checkPrefix(normalized)
        return (bucket, normalized)
    }

    /// A prefix's segments (split at every `/` byte) must not be empty, `.` or `..`: a server
    /// that normalised the path would store the entries under another key than the one listed.
    static func checkPrefix(_ prefix: String) throws(HalcyonError) {
        let bytes = Array(prefix.utf8.dropLast(prefix.isEmpty ? 0 : 1))
        guard !bytes.isEmpty else { return }
        for segment in bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            guard !segment.isEmpty, !segment.elementsEqual(".".utf8), !segment.elementsEqual("..".utf8) else {
                throw HalcyonError(.invalidOptions, "the S3 prefix \(prefix) has an empty, '.' or '..' segment")
            }
        }
    }

    /// S3's bucket naming rules (general purpose buckets).
    public static func checkBucket(_ name: String) throws(HalcyonError) {
        let bytes = Array(name.utf8)
        func fail(_ why: String) -> HalcyonError { HalcyonError(.invalidOptions, "bucket name \"\(name)\" \(why)") }
        guard (3...63).contains(bytes.count) else { throw fail("must be 3 to 63 characters long") }
        let allowed = bytes.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2E || $0 == 0x2D }
        guard allowed else { throw fail("may hold only lower-case letters, digits, dots and hyphens") }
        func alnum(_ b: UInt8) -> Bool { (0x61...0x7A).contains(b) || (0x30...0x39).contains(b) }
        guard alnum(bytes.first!), alnum(bytes.last!) else { throw fail("must begin and end with a letter or a digit") }
        guard !name.contains("..") else { throw fail("must not hold two dots in a row") }
        let parts = name.split(separator: ".")
        guard !(parts.count == 4 && parts.allSatisfy({ UInt8($0) != nil })) else { throw fail("must not look like an IP address") }
    }

    static func normalizedPrefix(_ prefix: String) -> String {
        var p = Substring(prefix)
        while p.hasPrefix("/") { p = p.dropFirst() }
        if p.isEmpty { return "" }
        return p.hasSuffix("/") ? String(p) : p + "/"
    }

    /// The endpoint requests go to: `endpoint`, or AWS's for the region.
    public var resolvedEndpoint: URL { endpoint ?? URL(string: "https://s3.\(region).amazonaws.com")! }

    /// Whether requests are path-style (see `pathStyle`).
    public var usesPathStyle: Bool {
        if let pathStyle { return pathStyle }
        let host = resolvedEndpoint.host ?? ""
        if host == "localhost" || host.hasSuffix(".localhost") || bucket.contains(".") { return true }
        return Self.isIPAddress(host)
    }

    static func isIPAddress(_ host: String) -> Bool {
        var h = host
        if h.hasPrefix("[") && h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, h, &v4) == 1 || inet_pton(AF_INET6, h, &v6) == 1
    }

    /// Checks every setting and the endpoint (`job.invalid_options` naming what is wrong).
    public func validate() throws(HalcyonError) {
        try Self.checkBucket(bucket)
        try Settings.connectTimeout.check(connectTimeout)
        try Settings.requestTimeout.check(requestTimeout)
        try Settings.maxAttempts.check(maxAttempts)
        try Settings.retryBaseDelay.check(retryBaseDelay)
        guard maxRetryDelay >= retryBaseDelay else { throw HalcyonError(.invalidOptions, "the S3 retry delay cap must not be below its base delay") }
        guard maxXMLBytes >= 64 << 10 else { throw HalcyonError(.invalidOptions, "the S3 XML answer limit must be at least 64KiB") }
        guard Array(prefix.utf8).count < Self.maxKeyBytes else { throw HalcyonError(.invalidOptions, "the S3 prefix is over 1024 bytes") }
        try Self.checkPrefix(prefix)
        let regionOK = !region.isEmpty && region.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }
        guard regionOK else { throw HalcyonError(.invalidOptions, "the S3 region must be lower-case letters, digits and hyphens; got \(region)") }
        let url = resolvedEndpoint
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", let host = url.host, !host.isEmpty else {
            throw HalcyonError(.invalidOptions, "the S3 endpoint must be http(s)://HOST[:PORT]; got \(Self.redacted(url))")
        }
        guard url.path.isEmpty || url.path == "/", url.query == nil, url.user == nil, url.password == nil else {
            throw HalcyonError(
                .invalidOptions, "the S3 endpoint must be http(s)://HOST[:PORT] without a path, query or user; got \(Self.redacted(url))")
        }
    }

    /// A URL without its user and password (and any credential in its query: `Redaction.url`).
    static func redacted(_ url: URL) -> String {
        guard url.user != nil || url.password != nil, var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            return Redaction.url(url.absoluteString)
        }
        parts.user = nil
        parts.password = nil
        return Redaction.url(parts.string ?? "(endpoint)")
    }

    /// `s3://bucket/prefix` and the endpoint, addressing and region; credentials only as "set" or not.
    public var description: String {
        let creds = credentials.map { $0.sessionToken == nil ? "credentials set" : "credentials and session token set" } ?? "no credentials"
        return
            "s3://\(bucket)/\(prefix) via \(Self.redacted(resolvedEndpoint)) (\(usesPathStyle ? "path-style" : "virtual-hosted"), \(region), \(creds))"
    }
}

func nonEmpty(_ s: String?) -> String? {
    guard let s, !s.isEmpty else { return nil }
    return s
}
