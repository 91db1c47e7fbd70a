internal import CPerceptual
import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonRuntime

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
        return hashes(bytes, quality: Int(quality), variants: variants)
    }

    /// The direct lane's pixels.
    static func compute(_ pixels: PixelBuffer, variants: Int = 1) throws(HalcyonError) -> [PerceptualHash]? {
        try compute(pixels.bytes, width: pixels.width, height: pixels.height, stride: pixels.stride, channels: pixels.channels, variants: variants)
    }

    /// The first frame of an ImageMagick image (decoded, so in sRGB), at its size, read out a
    /// band of rows at a time: the hash holds 64 rows of floats, not a copy of the image.
    static func compute(_ image: MagickImage, variants: Int = 1) throws(HalcyonError) -> [PerceptualHash]? {
        let (width, height) = image.firstFrameSize
        var state: OpaquePointer?
        switch Int(hc_pdq_begin(width, height, &state)) {
        case HC_PDQ_OK: break
        case HC_PDQ_TOO_SMALL: return nil
        default: throw HalcyonError(.imageTooLarge, "perceptual hash: out of memory for \(width)x\(height)")
        }
        defer { hc_pdq_free(state) }
        let band = max(1, min(height, Self.bandBytes / max(1, width * 3)))
        var rows = [UInt8](repeating: 0, count: band * width * 3)
        var y = 0
        while y < height {
            let count = min(band, height - y)
            // Read, then hashed: ImageMagick's error, or the hash's refusal (nil: both went well).
            let failure = rows.withUnsafeMutableBytes { buffer -> HalcyonError? in
                do throws(HalcyonError) {
                    try image.firstFrameRows8(y, count, into: buffer.baseAddress!, for: "perceptual hash")
                } catch {
                    return error
                }
                guard hc_pdq_rows(state, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), width * 3, 3, count) == HC_PDQ_OK else {
                    return HalcyonError(.processingFailed, "perceptual hash: rows \(y)..<\(y + count) of \(width)x\(height)")
                }
                return nil
            }
            if let failure { throw failure }
            y += count
        }
        return try finish(state, width: width, height: height, variants: variants)
    }

    /// The rows read out of ImageMagick at a time: about 1 MB.
    static let bandBytes = 1 << 20

    private static func finish(_ state: OpaquePointer?, width: Int, height: Int, variants: Int) throws(HalcyonError) -> [PerceptualHash] {
        var bytes = [UInt8](repeating: 0, count: variants * Int(HC_PDQ_HASH_BYTES))
        var quality: Int32 = 0
        let status = bytes.withUnsafeMutableBufferPointer { hc_pdq_finish(state, Int32(variants), $0.baseAddress, &quality) }
        guard Int(status) == HC_PDQ_OK else {
            throw HalcyonError(.processingFailed, "perceptual hash: \(width)x\(height) not finished (\(status))")
        }
        return hashes(bytes, quality: Int(quality), variants: variants)
    }

    /// The hex and quality of each variant's 32 bytes.
    private static func hashes(_ bytes: [UInt8], quality: Int, variants: Int) -> [PerceptualHash] {
        (0..<variants).map { v in
            let hash = bytes[(v * Int(HC_PDQ_HASH_BYTES))..<((v + 1) * Int(HC_PDQ_HASH_BYTES))]
            return PerceptualHash(hex: Digest.hex(Array(hash)), quality: quality)!
        }
    }
}
