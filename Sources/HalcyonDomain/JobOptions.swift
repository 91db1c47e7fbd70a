import Foundation
import HalcyonRuntime

/// The job's `options` object, validated. Unknown keys are rejected so a typo is an
/// error (`job.invalid_options`), not a silently ignored setting.
public struct JobOptions: Sendable, Equatable {
    public var forceRefresh = false
    public var onlyFromCache = false
    /// Default: 7 days.
    public var expiration: StorageExpiration = .days(7)
    /// Default: `cache_time`.
    public var extend: ExpirationExtending = .cacheTime
    public var headers: [String: String] = [:]
    /// Nil means the worker's default.
    public var retry: RetryOptions?
    /// Where the worker POSTs the job's outcome once it is finished (a webhook), nil for none.
    public var callbackURL: String?
    /// The placeholders to compute from the result (`placeholders`, `blurhash_components`);
    /// nil for none.
    public var placeholders: PlaceholderRequest?
    /// Record the source's GPS position in `source_meta` (`keep_gps`). Default false: only
    /// whether it had one.
    public var keepGPS = false
    /// Ask for the result's perceptual score (`result_score`) on a chain whose encoder quality is
    /// fixed too (`score`). Default false. The same bytes either way: no part of the result key.
    public var score = false
    /// The PDQ hashes to record (`perceptual_hash`: true or "source" for the source's, "output"
    /// for the output's too, "dihedral" for the source's eight dihedral variants); nil for none. No part of the result key: the same bytes either way.
    public var perceptualHash: PerceptualHashRequest?
    /// How a picture set's `<picture>` is written (`picture`: sizes, base_url, alt); nil for the
    /// defaults. No part of the result key: the markup only.
    public var picture: PictureOptions?

    public init() {}

    /// Headers a job may not set: hop-by-hop ones, and those the HTTP client owns.
    public static let forbiddenHeaders: Set<String> = [
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te",
        "trailer", "transfer-encoding", "upgrade", "host", "content-length", "expect", "accept-encoding",
    ]

    /// A header name must be an HTTP token, not forbidden; a value must have no line breaks.
    static func checkHeader(_ name: String, _ value: String) throws(HalcyonError) {
        let token = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        guard !name.isEmpty, name.count <= 256, name.allSatisfy({ token.contains($0) }) else {
            throw HalcyonError(.invalidOptions, "header name '\(name.prefix(64))' is not a valid HTTP token")
        }
        guard !forbiddenHeaders.contains(name.lowercased()) else {
            throw HalcyonError(.invalidOptions, "header '\(name)' cannot be set by a job (hop-by-hop or owned by the client)")
        }
        // Scalars, not Characters: "\r\n" is a single Character and would slip past a Character test.
        guard value.utf8.count <= 8192, !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
            throw HalcyonError(.invalidOptions, "header '\(name)' has a value with line breaks or over 8 KiB")
        }
    }

    public static let knownKeys: Set<String> = [
        "force_refresh", "only_from_cache", "expiration", "extend", "headers", "retry", "callback_url", "placeholders", "blurhash_components",
        "keep_gps", "score", "perceptual_hash", "picture",
    ]

    /// Longest `callback_url` (also a constraint on the row).
    public static let maxCallbackURLBytes = 4096

    /// Parses the `options` JSON text of a job row.
    public static func parse(json: String) throws(HalcyonError) -> JobOptions {
        guard let value = JSONValue.parse(json), case .object(let dict) = value else {
            throw HalcyonError(.invalidOptions, "options must be a JSON object")
        }
        return try parse(dict)
    }

    public static func parse(_ dict: [String: JSONValue]) throws(HalcyonError) -> JobOptions {
        var options = JobOptions()
        for key in dict.keys.sorted() where !knownKeys.contains(key) {
            throw HalcyonError(.invalidOptions, "unknown option '\(key)' (known: \(knownKeys.sorted().joined(separator: ", ")))")
        }
        func bool(_ key: String) throws(HalcyonError) -> Bool? {
            guard let v = dict[key] else { return nil }
            guard let b = v.boolValue else { throw HalcyonError(.invalidOptions, "option '\(key)' must be true or false") }
            return b
        }
        func string(_ key: String) throws(HalcyonError) -> String? {
            guard let v = dict[key] else { return nil }
            guard let s = v.stringValue else { throw HalcyonError(.invalidOptions, "option '\(key)' must be a string") }
            return s
        }
        options.forceRefresh = try bool("force_refresh") ?? false
        options.onlyFromCache = try bool("only_from_cache") ?? false
        if let s = try string("expiration") {
            guard let e = StorageExpiration.parse(s) else {
                throw HalcyonError(
                    .invalidOptions, "option 'expiration' must be never, expired, a duration like 7d, or an ISO-8601 instant; got '\(s)'")
            }
            options.expiration = e
        }
        if let s = try string("extend") {
            guard let e = ExpirationExtending.parse(s) else {
                throw HalcyonError(.invalidOptions, "option 'extend' must be none, cache_time or a duration; got '\(s)'")
            }
            options.extend = e
        }
        if let h = dict["headers"] {
            guard case .object(let headers) = h else { throw HalcyonError(.invalidOptions, "option 'headers' must be an object of strings") }
            for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
                guard let v = value.stringValue else { throw HalcyonError(.invalidOptions, "header '\(name)' must be a string") }
                try checkHeader(name, v)
                options.headers[name] = v
            }
        }
        if let r = dict["retry"] {
            guard case .object(let retry) = r else { throw HalcyonError(.invalidOptions, "option 'retry' must be an object") }
            var retryOptions = RetryOptions()
            for key in retry.keys.sorted() where !["max", "interval", "backoff"].contains(key) {
                throw HalcyonError(.invalidOptions, "unknown key 'retry.\(key)' (known: max, interval, backoff)")
            }
            if let m = retry["max"] {
                let range = RetryOptions.maxRange
                guard let n = m.numberValue, n == n.rounded(), n >= Double(range.lowerBound), n <= Double(range.upperBound) else {
                    throw HalcyonError(.invalidOptions, "retry.max must be an integer from \(range.lowerBound) to \(range.upperBound)")
                }
                retryOptions.max = Int(n)
            }
            if let i = retry["interval"] {
                let longest = RetryOptions.intervalRange.upperBound
                guard let s = i.stringValue, let seconds = TimeSpan.parse(s), seconds <= longest.seconds else {
                    throw HalcyonError(.invalidOptions, "retry.interval must be a duration up to \(TimeSpan.format(longest.seconds)), like \"2s\"")
                }
                retryOptions.interval = seconds
            }
            if let b = retry["backoff"] {
                guard let s = b.stringValue, let v = RetryOptions.Backoff(rawValue: s) else {
                    throw HalcyonError(.invalidOptions, "retry.backoff must be fixed, accumulated or exponential")
                }
                retryOptions.backoff = v
            }
            options.retry = retryOptions
        }
        if let url = try string("callback_url") {
            let scheme = url.prefix(8).lowercased()
            guard url.utf8.count <= maxCallbackURLBytes, scheme.hasPrefix("http://") || scheme.hasPrefix("https://"),
                let parsed = URL(string: url), parsed.host?.isEmpty == false
            else {
                throw HalcyonError(.invalidOptions, "option 'callback_url' must be an http(s) URL of at most \(maxCallbackURLBytes) bytes")
            }
            options.callbackURL = url
        }
        options.keepGPS = try bool("keep_gps") ?? false
        options.score = try bool("score") ?? false
        if let v = dict["perceptual_hash"] {
            switch v {
            case .bool(let on): options.perceptualHash = on ? .source : nil
            case .string(let s) where PerceptualHashRequest(rawValue: s) != nil: options.perceptualHash = PerceptualHashRequest(rawValue: s)
            default:
                throw HalcyonError(.invalidOptions, "option 'perceptual_hash' must be true, false, \"source\", \"output\" or \"dihedral\"")
            }
        }
        options.placeholders = try placeholders(dict)
        options.picture = try dict["picture"].map { v throws(HalcyonError) in try PictureOptions.parse(v) }
        return options
    }

    /// `placeholders: ["blurhash", "thumbhash", "dominant_color"]` and `blurhash_components: [X, Y]`.
    private static func placeholders(_ dict: [String: JSONValue]) throws(HalcyonError) -> PlaceholderRequest? {
        let known = PlaceholderKind.allCases.map(\.rawValue).joined(separator: ", ")
        guard let value = dict["placeholders"] else {
            if dict["blurhash_components"] != nil {
                throw HalcyonError(.invalidOptions, "option 'blurhash_components' needs \"blurhash\" in 'placeholders'")
            }
            return nil
        }
        guard let list = value.arrayValue, list.count <= PlaceholderKind.allCases.count * 2 else {
            throw HalcyonError(.invalidOptions, "option 'placeholders' must be an array of \(known)")
        }
        var kinds: Set<PlaceholderKind> = []
        for item in list {
            guard let name = item.stringValue, let kind = PlaceholderKind(rawValue: name) else {
                throw HalcyonError(.invalidOptions, "unknown placeholder \(item.jsonText.prefix(64)) (known: \(known))")
            }
            kinds.insert(kind)
        }
        var request = PlaceholderRequest(kinds: kinds)
        if let c = dict["blurhash_components"] {
            guard kinds.contains(.blurhash), let xy = c.arrayValue, xy.count == 2, let x = xy[0].numberValue, let y = xy[1].numberValue,
                x == x.rounded(), y == y.rounded(), (1...9).contains(x), (1...9).contains(y)
            else {
                throw HalcyonError(
                    .invalidOptions, "option 'blurhash_components' must be [X, Y], integers from 1 to 9, with \"blurhash\" in 'placeholders'")
            }
            (request.blurhashX, request.blurhashY) = (Int(x), Int(y))
        }
        return kinds.isEmpty ? nil : request
    }
}
