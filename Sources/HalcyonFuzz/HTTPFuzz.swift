import Foundation
import HalcyonCore

/// Fuzz target `http`: a request as the built-in HTTP server (metrics, dashboard, demo origin)
/// reads it from a client — `HTTPServer.read(receive:)`: the search for the head's end across
/// reads, the head's parse (`parseHead`: request line, header fields, the 400/411/413/431
/// refusals), the `Content-Length` body — and what a handler then asks of the request (path,
/// query, form fields, headers).
///
/// The input arrives in pieces whose sizes its first byte picks, and again all at once.
/// Properties checked: both readings agree (the split into reads never changes the request or
/// the refusal); a refusal is 400, 411, 413 or 431; a body is as long as its `Content-Length`.
public enum HTTPFuzz {
    public static func run(_ data: Data) {
        let bytes = [UInt8](data)
        let pieces = read(bytes, pieceSizes: pieceSizes(bytes.first ?? 0))
        let whole = read(bytes, pieceSizes: [4096])
        precondition(describe(pieces) == describe(whole), "in pieces: \(describe(pieces)); whole: \(describe(whole))")
        if let refusal = whole.1 {
            precondition([400, 411, 413, 431].contains(refusal.status), "refused with \(refusal.status)")
        }
        if let request = whole.0 {
            if whole.1 == nil, let length = request.header("content-length").flatMap({ Int($0) }) {
                precondition(request.body.count == length, "a body of \(request.body.count) bytes, Content-Length \(length)")
            }
            _ = request.path
            _ = request.query
            _ = request.form
            _ = request.header("Content-Type")
        }
    }

    /// Read sizes that cycle: 1–7 bytes, then 1–4096.
    static func pieceSizes(_ seed: UInt8) -> [Int] {
        let small = 1 + Int(seed % 7)
        return [small, 4096, small * 3, 1, 977, 3, 2048]
    }

    /// `HTTPServer.read` over `bytes`, served `pieceSizes` bytes (cycling) per read, at most what it asks for.
    static func read(_ bytes: [UInt8], pieceSizes: [Int]) -> (HTTPServer.Request?, HTTPServer.Response?) {
        var offset = 0, piece = 0
        return HTTPServer.read { buffer in
            let n = min(buffer.count, pieceSizes[piece % pieceSizes.count], bytes.count - offset)
            piece += 1
            guard n > 0 else { return 0 }
            bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + n)])) }
            offset += n
            return n
        }
    }

    static func describe(_ outcome: (HTTPServer.Request?, HTTPServer.Response?)) -> String {
        let request = outcome.0.map { r in
            "\(r.method) \(r.target) \(r.headers.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }) \(Array(r.body))"
        }
        let response = outcome.1.map { "\($0.status) \(String(decoding: $0.body, as: UTF8.self))" }
        return "\(request ?? "-") / \(response ?? "-")"
    }
}
