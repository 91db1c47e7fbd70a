import Foundation
import HalcyonDomain
import HalcyonFetch

/// Fuzz target `source`: a job's `source` (and, one per line, its `fallback_sources`) through
/// `Source.parse` — http(s) URLs (Foundation's `URL`), `file://` URLs, `s3://` objects, `data:` URLs with base64
/// or percent-encoded payloads — and `FetchRequest`; the host of a network URL, when it is an
/// address literal, through the SSRF guard; the whole text as a `--allow-network` CIDR.
///
/// Properties checked: every refusal is `job.invalid_source` or `fetch.too_large`; a `data:`
/// payload never exceeds its cap; a file source's path is absolute.
public enum SourceFuzz {
    /// The `data:` cap here (the worker's default is 10 MiB; inputs are far smaller).
    static let maxDataBytes = 1 << 16

    public static func run(_ data: Data) {
        let text = String(decoding: data, as: UTF8.self)
        check(text)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).prefix(16).map(String.init)
        if lines.count > 1 {
            for line in lines { check(line) }
            if let request = try? FetchRequest(sources: lines, headers: ["X-Fuzz": "1"], maxDataBytes: maxDataBytes) {
                _ = request.sharingKey
                _ = request.isLocal
                for source in request.sources { _ = request.key(for: source) }
            }
        }
        if let cidr = CIDR(text) {
            _ = cidr.description
            for address in ["127.0.0.1", "::1", "10.1.2.3", "2001:db8::1"] { _ = cidr.contains(IPAddress(address)!) }
            _ = AddressPolicy(allowed: [cidr]).refusal(for: IPAddress("169.254.169.254")!)
        }
    }

    static func check(_ text: String) {
        _ = cacheKey(source: text, explicit: nil)
        let source: Source
        do {
            source = try Source.parse(text, maxDataBytes: maxDataBytes)
        } catch {
            precondition(error.code == .invalidSource || error.code == .tooLarge, "source '\(text)' failed with \(error.code)")
            return
        }
        _ = source.displayName
        switch source {
        case .network(let url):
            _ = url.absoluteString
            if let host = url.host {
                let literal = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
                if let address = IPAddress(literal) {
                    _ = address.description
                    _ = AddressPolicy().refusal(for: address)
                }
            }
        case .file(let path):
            precondition(path.hasPrefix("/"), "file source '\(text)' has the path '\(path)'")
        case .object(let bucket, let key):
            precondition(!bucket.isEmpty && !key.isEmpty && key.utf8.count <= 1024, "s3 source '\(text)' has bucket '\(bucket)', key '\(key)'")
        case .data(let mediaType, let bytes):
            precondition(bytes.count <= maxDataBytes, "data source of \(bytes.count) bytes over \(maxDataBytes)")
            _ = mediaType
        }
    }
}
