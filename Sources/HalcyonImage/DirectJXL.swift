internal import CImageCodecs
import Foundation
import HalcyonChain
import HalcyonDomain

/// JPEG XL through libjxl directly: ImageMagick 6 has no coder for it.
extension MagickImage {
    /// The first frame as a JPEG XL at `outputQuality` (100: lossless) and `jxlEffort`, lowered
    /// to 7 for a large output (`FormatStep.jxlEffort(_:for:)`).
    func encodeJXL() throws(HalcyonError) -> Data {
        let frame = try firstFrameSamples8(for: "encode jxl")
        return try Self.encodeJXL(
            frame.pixels, width: frame.width, height: frame.height, channels: frame.channels, quality: outputQuality,
            effort: FormatStep.jxlEffort(jxlEffort, for: frame.width * frame.height))
    }

    /// 8-bit sRGB pixels (rows packed, `channels` 3 or 4) as a JPEG XL codestream, one thread.
    package static func encodeJXL(
        _ pixels: [UInt8], width: Int, height: Int, channels: Int, quality: Int, effort: Int
    ) throws(HalcyonError) -> Data {
        try CodecOutput.take("encode jxl", library: "libjxl") { out, size, message in
            pixels.withUnsafeBufferPointer {
                hc_jxl_encode(
                    $0.baseAddress, Int32(width), Int32(height), Int32(channels), Int32(min(max(quality, 1), 100)),
                    Int32(min(max(effort, 1), 9)), out, size, message)
            }
        }
    }

    /// A JPEG's own bytes recompressed losslessly as JPEG XL, with what `djxl` needs to give the
    /// JPEG back byte for byte. `image.unsupported_format` when libjxl cannot take this JPEG.
    package static func transcodeJPEGToJXL(_ jpeg: Data, effort: Int) throws(HalcyonError) -> Data {
        try CodecOutput.take("recompress the JPEG as jxl", library: "libjxl", refused: .unsupportedFormat) { out, size, message in
            jpeg.withUnsafeBytes {
                hc_jxl_transcode_jpeg(
                    $0.baseAddress?.assumingMemoryBound(to: UInt8.self), $0.count, Int32(min(max(effort, 1), 9)), out, size, message)
            }
        }
    }
}
