internal import CImageCodecs
import Foundation
import HalcyonDomain

/// What a codec shim of `CImageCodecs` returns: a status, and on success a buffer to `hc_free`.
enum CodecOutput {
    /// Runs `call` with the out pointer, its size and a message buffer; the buffer's bytes when
    /// it returns 0. A -1 is `refused` (what the library declined to do), anything else
    /// `image.processing_failed`; either with the shim's message.
    static func take(
        _ what: String, library: String, refused: ErrorCode = .processingFailed,
        _ call: (UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, UnsafeMutablePointer<Int>, UnsafeMutablePointer<CChar>) -> Int32
    ) throws(HalcyonError) -> Data {
        var out: UnsafeMutablePointer<UInt8>?
        var size = 0
        let (status, message) = withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(HC_ERROR_LENGTH)) { buffer in
            buffer[0] = 0
            let status = call(&out, &size, buffer.baseAddress!)
            return (status, String(cString: buffer.baseAddress!))
        }
        guard status == 0, let out else {
            throw HalcyonError(status == -1 ? refused : .processingFailed, "\(what): \(message.isEmpty ? "\(library) failed" : message)")
        }
        defer { hc_free(out) }
        return Data(bytes: out, count: size)
    }
}
