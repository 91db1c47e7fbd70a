import Foundation
import HTTPTypes
import Hummingbird

extension Response {
    /// A whole body of `contentType`.
    public static func body(
        _ status: HTTPResponse.Status, contentType: String, _ bytes: some Sequence<UInt8>, headers: HTTPFields = [:]
    ) -> Response {
        var fields = headers
        fields[.contentType] = contentType
        return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// Plain UTF-8 text.
    public static func text(_ status: HTTPResponse.Status, _ text: String, headers: HTTPFields = [:]) -> Response {
        body(status, contentType: "text/plain; charset=utf-8", Array(text.utf8), headers: headers)
    }

    /// The body's bytes (a test's or a direct call's view of a response); empty for a streamed body.
    public var bytes: [UInt8] {
        get async {
            let collector = BodyCollector()
            try? await body.write(collector)
            return collector.bytes
        }
    }
}

/// Collects a response body written in pieces.
private final class BodyCollector: ResponseBodyWriter, @unchecked Sendable {
    var bytes: [UInt8] = []
    func write(_ buffer: ByteBuffer) async throws { bytes += buffer.readableBytesView }
    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}

/// `application/x-www-form-urlencoded` fields: a query string or a form post's body.
public enum HTTPForm {
    /// `a=1&b=two+words` → [("a", "1"), ("b", "two words")], in order; a field whose name or
    /// value does not percent-decode, or whose name is empty, is dropped.
    public static func fields(_ text: some StringProtocol) -> [(name: String, value: String)] {
        String(text).split(separator: "&").compactMap { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String? { s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
            guard let name = decode(parts[0]), !name.isEmpty, let value = decode(parts.count > 1 ? parts[1] : "") else { return nil }
            return (name, value)
        }
    }

    /// The query's fields of `request` (empty without a query).
    public static func query(_ request: Request) -> [(name: String, value: String)] {
        request.uri.query.map { fields($0) } ?? []
    }
}

/// Answers a request no route takes with `text` (404) instead of Hummingbird's empty 404; a
/// `HEAD` gets the headers alone.
public struct NotFoundText<Context: RequestContext>: RouterMiddleware {
    public let text: String

    public init(text: String) {
        self.text = text
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            let response = Response.text(.notFound, text)
            return request.method == .head ? response.createHeadResponse() : response
        }
    }
}
