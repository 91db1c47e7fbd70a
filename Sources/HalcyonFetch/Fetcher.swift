import Foundation
import HalcyonCore

/// Image bytes and where they came from.
public struct FetchedImage: Sendable {
    public var data: Data
    /// The sniffed format (never the server's claim).
    public var format: ImageFormat
    /// The source string that produced the bytes.
    public var source: String
}

/// Fetches a job's source: network, file under a root, or data URL. Bytes that are not an
/// allowed image format fail with `fetch.not_image` and never reach ImageMagick.
public struct Fetcher: Sendable {
    public var configuration: FetchConfiguration
    private let http: HTTPClient

    public init(configuration: FetchConfiguration) {
        self.configuration = configuration
        self.http = HTTPClient(configuration: configuration)
    }

    /// Fetches `sourceText`, running blocking I/O off the cooperative pool.
    public func fetch(_ sourceText: String, headers: [String: String] = [:], cancel: CancellationFlag) async throws(HalcyonError) -> FetchedImage {
        let source = try Source.parse(sourceText, maxDataBytes: configuration.maxBytes)
        let http = self.http, roots = configuration.fileRoots
        let data: Data
        do {
            data = try await Blocking.run {
                switch source {
                case .network(let url): try http.get(url, headers: headers, cancel: cancel).body
                case .file(let path): try Self.readFile(path, roots: roots, source: sourceText)
                case .data(_, let bytes): bytes
                }
            }
        } catch {
            throw HalcyonError.wrap(error)
        }
        guard let format = ImageFormat.sniff(data) else {
            throw HalcyonError(.notImage, data.isEmpty ? "empty body" : "body is not a supported image (magic bytes \(data.prefix(8).map { String(format: "%02x", $0) }.joined()))", source: sourceText)
        }
        return FetchedImage(data: data, format: format, source: sourceText)
    }

    /// Reads a file that must resolve (symlinks included) to a path beneath one of `roots`.
    static func readFile(_ path: String, roots: [String], source: String) throws(HalcyonError) -> Data {
        guard !roots.isEmpty else {
            throw HalcyonError(.invalidSource, "file:// sources are disabled: start the worker with --file-root DIR", source: source)
        }
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().standardizedFileURL.path
        let allowed = roots.contains { root in
            let r = URL(fileURLWithPath: root).resolvingSymlinksInPath().standardizedFileURL.path
            let prefix = r.hasSuffix("/") ? r : r + "/"
            return resolved.hasPrefix(prefix)
        }
        guard allowed else {
            throw HalcyonError(.invalidSource, "\(path) is not beneath a configured --file-root", source: source)
        }
        guard let data = FileManager.default.contents(atPath: resolved) else {
            throw HalcyonError(.fileNotFound, "cannot read \(path)", source: source)
        }
        return data
    }
}
