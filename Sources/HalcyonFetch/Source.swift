import Foundation
import HalcyonDomain
import HalcyonS3

/// Where a job's image comes from (Kingfisher's `Source`): a network URL, a file beneath a
/// configured root, an object in S3 (`s3://BUCKET/KEY`, read from the worker's configured
/// endpoint with its credentials), or inline `data:` bytes.
public enum Source: Sendable, Equatable {
    case network(URL)
    case file(path: String)
    /// `s3://BUCKET/KEY`: the key is taken literally (no percent-decoding; `?`, `#`, `%` and
    /// spaces are part of it), 1–1,024 bytes, without `.` or `..` segments.
    case object(bucket: String, key: String)
    case data(mediaType: String, bytes: Data)

    /// Largest decoded `data:` source (10 MiB): inline bytes live in the job row.
    public static let maxDataBytes = 10 << 20

    /// Parses a source string; `job.invalid_source` when it is not one Halcyon can fetch.
    /// `maxDataBytes` caps decoded `data:` URLs.
    public static func parse(_ text: String, maxDataBytes: Int = Source.maxDataBytes) throws(HalcyonError) -> Source {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        // Only the scheme is compared: a data: URL may be megabytes long.
        let lower = trimmed.prefix(8).lowercased()
        if lower.hasPrefix("http://") || lower.hasPrefix("https://") {
            guard let url = URL(string: trimmed), let host = url.host, !host.isEmpty,
                ["http", "https"].contains(url.scheme?.lowercased() ?? "")
            else {
                throw HalcyonError(.invalidSource, "not a valid http(s) URL: \(text.prefix(200))", source: text)
            }
            return .network(url)
        }
        if lower.hasPrefix("file://") {
            guard let url = URL(string: trimmed), url.host == nil || url.host == "" || url.host == "localhost" else {
                throw HalcyonError(.invalidSource, "file URLs must be file:///absolute/path", source: text)
            }
            let path = url.path
            guard path.hasPrefix("/") else { throw HalcyonError(.invalidSource, "file URLs must be absolute", source: text) }
            return .file(path: path)
        }
        if lower.hasPrefix("s3://") {
            return try parseObject(trimmed, text)
        }
        if lower.hasPrefix("data:") {
            return try parseData(trimmed, maxBytes: maxDataBytes)
        }
        throw HalcyonError(
            .invalidSource, "unsupported source scheme (use http://, https://, file:///, s3:// or data:): \(text.prefix(200))", source: text)
    }

    /// `s3://BUCKET/KEY`: the bucket by S3's naming rules (as `S3Configuration` checks them), the
    /// key literal. Checked as UTF-8 bytes, never as `Character`s (a grapheme cluster can swallow
    /// a `/`: `\u{600}/` is one `Character`, so splitting by `Character` hides the segment after
    /// it). A key with an empty, `.` or `..` segment (`a//b`, `/a`, `a/`, `a/../b`) is refused:
    /// a server that normalised the path would read another key — or another bucket — than the
    /// one named.
    private static func parseObject(_ trimmed: String, _ text: String) throws(HalcyonError) -> Source {
        let bytes = Array(trimmed.utf8)
        let slash = UInt8(ascii: "/")
        // "s3://" (any case: the caller compared it) is five ASCII bytes.
        let rest = bytes.dropFirst(5)
        guard let split = rest.firstIndex(of: slash) else {
            throw HalcyonError(.invalidSource, "an S3 source is s3://BUCKET/KEY: no key in \(text.prefix(200))", source: text)
        }
        let bucket = String(decoding: rest[..<split], as: UTF8.self)
        let keyBytes = rest[(split + 1)...]
        do throws(HalcyonError) {
            try S3Configuration.checkBucket(bucket)
        } catch {
            throw HalcyonError(.invalidSource, "S3 source: \(error.message)", source: text)
        }
        guard !keyBytes.isEmpty else { throw HalcyonError(.invalidSource, "an S3 source is s3://BUCKET/KEY: the key is empty", source: text) }
        guard keyBytes.count <= S3Configuration.maxKeyBytes else {
            throw HalcyonError(
                .invalidSource, "S3 key is \(keyBytes.count) bytes, over S3's \(S3Configuration.maxKeyBytes)", source: String(text.prefix(200)))
        }
        for segment in keyBytes.split(separator: slash, omittingEmptySubsequences: false) {
            guard !segment.isEmpty else {
                throw HalcyonError(
                    .invalidSource, "S3 key has an empty segment (a leading, trailing or doubled '/'): \(text.prefix(200))", source: text)
            }
            guard !segment.elementsEqual([UInt8(ascii: ".")]), !segment.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")]) else {
                throw HalcyonError(.invalidSource, "S3 key has a '.' or '..' segment: \(text.prefix(200))", source: text)
            }
        }
        // Control characters are ASCII (C0 and DEL) or U+0080–U+009F (C1: 0xC2 0x80–0x9F in UTF-8).
        let hasControl = keyBytes.indices.contains { i in
            let b = keyBytes[i]
            return b < 0x20 || b == 0x7F || (b == 0xC2 && i + 1 < keyBytes.endIndex && (0x80...0x9F).contains(keyBytes[i + 1]))
        }
        guard !hasControl else {
            throw HalcyonError(.invalidSource, "S3 key has a control character", source: String(text.prefix(200)))
        }
        return .object(bucket: bucket, key: String(decoding: keyBytes, as: UTF8.self))
    }

    private static func parseData(_ text: String, maxBytes: Int) throws(HalcyonError) -> Source {
        guard let comma = text.firstIndex(of: ",") else {
            throw HalcyonError(.invalidSource, "data: URL has no ',' before its payload", source: "data:…")
        }
        let header = text[text.index(text.startIndex, offsetBy: 5)..<comma]
        let payload = text[text.index(after: comma)...]
        let parts = header.split(separator: ";").map(String.init)
        let base64 = parts.last?.lowercased() == "base64"
        let mediaType = parts.first.flatMap { $0.contains("/") ? $0 : nil } ?? "application/octet-stream"
        // Base64 is 4/3 the size of its bytes, percent-encoding at most 3×: refuse before
        // decoding anything certainly too big.
        if base64 ? payload.utf8.count / 4 * 3 > maxBytes + 3 : payload.utf8.count / 3 > maxBytes + 1 {
            throw HalcyonError(.tooLarge, "data: URL payload exceeds \(maxBytes) bytes", source: "data:\(header),…")
        }
        let bytes: Data? = base64 ? Data(base64Encoded: String(payload), options: .ignoreUnknownCharacters) : percentDecoded(payload)
        guard let bytes else {
            throw HalcyonError(.invalidSource, "data: URL payload is not valid \(base64 ? "base64" : "percent-encoding")", source: "data:\(header),…")
        }
        guard bytes.count <= maxBytes else {
            throw HalcyonError(.tooLarge, "data: URL payload exceeds \(maxBytes) bytes", source: "data:\(header),…")
        }
        return .data(mediaType: mediaType, bytes: bytes)
    }

    /// Percent-decodes to bytes (not to a string: a binary payload is rarely UTF-8); nil for a
    /// `%` not followed by two hex digits.
    static func percentDecoded(_ text: Substring) -> Data? {
        var out = Data()
        out.reserveCapacity(text.utf8.count)
        var it = text.utf8.makeIterator()
        func hex(_ c: UInt8?) -> UInt8? {
            guard let c else { return nil }
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        while let c = it.next() {
            if c == UInt8(ascii: "%") {
                guard let hi = hex(it.next()), let lo = hex(it.next()) else { return nil }
                out.append(hi << 4 | lo)
            } else {
                out.append(c)
            }
        }
        return out
    }

    /// A short form for logs and error entries (data: payloads elided).
    public var displayName: String {
        switch self {
        case .network(let url): url.absoluteString
        case .file(let path): "file://\(path)"
        case .object(let bucket, let key): "s3://\(bucket)/\(key)"
        case .data(let type, let bytes): "data:\(type);base64,… (\(bytes.count) bytes)"
        }
    }
}

/// The key a source is cached under: the job's `cache_key`, else the source string.
public func cacheKey(source: String, explicit: String?) -> String {
    if let explicit, !explicit.isEmpty { return explicit }
    return source
}
