import Foundation
import HalcyonDomain

/// A source as the job wrote it and what it names, parsed once.
public struct SourceReference: Sendable, Equatable {
    /// As written in the job (errors and results quote it).
    public let text: String
    public let source: Source

    public init(_ text: String, maxDataBytes: Int = Source.maxDataBytes) throws(HalcyonError) {
        self.text = text
        self.source = try Source.parse(text, maxDataBytes: maxDataBytes)
    }

    /// Judges the watermark sources a chain names (`Chain.watermarkSources`) as sources
    /// are judged: a malformed one, or one of a scheme Halcyon does not fetch, is
    /// `job.invalid_source` naming the watermark. The one check the worker makes before any
    /// download and `halcyon enqueue`, `validate` and `preset set` make before a chain is
    /// accepted, so no chain the worker would refuse gets into the queue through them. (What
    /// depends on a worker — its `--file-root`, its S3 credentials — is judged by the worker.)
    public static func checkWatermarks(_ sources: [String], maxDataBytes: Int = Source.maxDataBytes) throws(HalcyonError) {
        for mark in sources {
            do throws(HalcyonError) {
                _ = try SourceReference(mark, maxDataBytes: maxDataBytes)
            } catch {
                throw HalcyonError(error.code, "watermark: \(error.message)", source: mark)
            }
        }
    }
}

/// What a job asks the fetcher for — its sources in order, the request headers and the retry
/// strategy — validated once, with the keys that depend on the request made once.
public struct FetchRequest: Sendable {
    public let sources: [SourceReference]
    public let headers: [String: String]
    /// The job's own retry strategy (`options.retry`); nil for the fetcher's.
    public let retry: (any RetryStrategy)?
    /// The headers in canonical order, one `name:value` per line ("" without headers): headers
    /// can change the answer (an authorization), so every key of a request includes them.
    public let headerKey: String

    /// Throws `job.invalid_source` for the first source that is not one.
    public init(
        sources: [String], headers: [String: String] = [:], retry: (any RetryStrategy)? = nil,
        maxDataBytes: Int = Source.maxDataBytes
    ) throws(HalcyonError) {
        var parsed: [SourceReference] = []
        for text in sources { parsed.append(try SourceReference(text, maxDataBytes: maxDataBytes)) }
        self.sources = parsed
        self.headers = headers
        self.retry = retry
        headerKey = headers.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: "\n")
    }

    /// Every source is on this machine (`file://`) or in the job (`data:`), none on a network (http, S3): nothing to wait for
    /// but a read, so nothing gained by reading it long before it can be decoded.
    public var isLocal: Bool {
        sources.allSatisfy {
            switch $0.source {
            case .network, .object: false
            case .file, .data: true
            }
        }
    }

    /// The key of one source's request (download coalescing, the originals cache).
    public func key(for source: SourceReference) -> String {
        headerKey.isEmpty ? source.text : source.text + "\n" + headerKey
    }

    /// What must match for two jobs to share a download and a decode: every source, in order,
    /// and the headers.
    public var sharingKey: String {
        sources.map(\.text).joined(separator: "\n") + "\n#" + headerKey
    }
}
