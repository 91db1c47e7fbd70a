internal import CImageCodecs
import Foundation
import HalcyonDomain

extension MagickImage {
    /// The buffer a codec shim of `CImageCodecs` returns (`hc_free`d here): `call` gets the out
    /// pointer, its size and the message buffer, and returns 0 on success. Its -1 is `refused`
    /// (what the library declined), anything else `image.processing_failed`, with its message.
    static func codecOutput(
        _ what: String, library: String, refused: ErrorCode = .processingFailed,
        _ call: (inout UnsafeMutablePointer<UInt8>?, inout Int, UnsafeMutablePointer<CChar>) -> Int32
    ) throws(HalcyonError) -> Data {
        var out: UnsafeMutablePointer<UInt8>?
        var size = 0
        var message = [CChar](repeating: 0, count: Int(HC_ERROR_LENGTH))
        let status = message.withUnsafeMutableBufferPointer { call(&out, &size, $0.baseAddress!) }
        guard status == 0, let out else {
            let reason = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw HalcyonError(status == -1 ? refused : .processingFailed, "\(what): \(reason.isEmpty ? "\(library) failed" : reason)")
        }
        defer { hc_free(out) }
        return Data(bytes: out, count: size)
    }
}
