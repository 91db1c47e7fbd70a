internal import CPerceptual
import Foundation
import HalcyonChain
import HalcyonDomain

/// PDQ of pixels (`pdq.c`): `PerceptualHash` is the value, in HalcyonDomain.
extension PerceptualHash {
    /// Hashes 8-bit interleaved pixels (1–4 channels; alpha is ignored, as the reference
    /// does); `variants` is 1 (the original) or 8 (every dihedral variant, in `Variant` order).
    /// An image under 5 pixels a side has no hash (nil).
    static func compute(
        _ pixels: UnsafePointer<UInt8>, width: Int, height: Int, stride: Int, channels: Int, variants: Int = 1
    ) throws(HalcyonError) -> [PerceptualHash]? {
        var bytes = [UInt8](repeating: 0, count: variants * Int(HC_PDQ_HASH_BYTES))
        var quality: Int32 = 0
        let status = bytes.withUnsafeMutableBufferPointer {
            hc_pdq_hash(pixels, width, height, stride, Int32(channels), Int32(variants), $0.baseAddress, &quality)
        }
        switch Int(status) {
        case HC_PDQ_OK: break
        case HC_PDQ_TOO_SMALL: return nil
        case HC_PDQ_NO_MEMORY: throw HalcyonError(.imageTooLarge, "perceptual hash: out of memory for \(width)x\(height)")
        default: throw HalcyonError(.processingFailed, "perceptual hash: invalid pixels (\(width)x\(height), \(channels) channels)")
        }
        return (0..<variants).map { v in
            let hash = bytes[(v * Int(HC_PDQ_HASH_BYTES))..<((v + 1) * Int(HC_PDQ_HASH_BYTES))]
            return PerceptualHash(hex: hash.map { String(format: "%02x", $0) }.joined(), quality: Int(quality))!
        }
    }

    /// The direct lane's pixels.
    static func compute(_ pixels: PixelBuffer, variants: Int = 1) throws(HalcyonError) -> [PerceptualHash]? {
        try compute(pixels.bytes, width: pixels.width, height: pixels.height, stride: pixels.stride, channels: pixels.channels, variants: variants)
    }

    /// The first frame of an ImageMagick image (in sRGB), at its size.
    static func compute(_ image: MagickImage, variants: Int = 1) throws(HalcyonError) -> [PerceptualHash]? {
        let frame = try image.firstFrameSamples8(for: "perceptual hash")
        return try frame.pixels.withUnsafeBufferPointer { buffer throws(HalcyonError) in
            try compute(
                buffer.baseAddress!, width: frame.width, height: frame.height, stride: frame.width * frame.channels, channels: frame.channels,
                variants: variants)
        }
    }
}
