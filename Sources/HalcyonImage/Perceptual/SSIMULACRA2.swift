internal import CImageCodecs
internal import CMagickWand
internal import CPerceptual
import Foundation
import HalcyonDomain

/// A reference image prepared for SSIMULACRA 2.1, the perceptual metric of libjxl's
/// `ssimulacra2` tool (Cloudinary, 2022–2023; `Sources/CPerceptual/ssimulacra2.c` says where
/// this implementation differs): how close a distorted version (an encode) looks to the
/// reference, 100 for identical, about 90 visually lossless, 70 high quality, 50 medium, 30
/// low; strong distortions go below 0.
///
/// The reference's colour conversion and blurs, at every scale, are done once here, and then
/// `score` runs against any number of encodes of it. It holds 48 bytes a pixel (96 when the
/// reference has transparency: it is scored over a dark and a light background, the worse
/// counts); a score takes about 4 bytes a pixel more while it runs. The calls block (tens of
/// milliseconds a megapixel); call them from the image process's own threads.
///
/// `@unchecked Sendable`: the C reference is immutable once prepared and scoring only reads it,
/// so any number of threads may score against one reference at once.
public final class SSIMULACRA2Reference: @unchecked Sendable {
    /// The least width and height scored: the metric's first scale is 8×8.
    public static let minimumSide = 8

    public let width: Int
    public let height: Int
    /// The bytes the prepared reference holds.
    public let bytes: Int
    /// Whether any pixel of the reference is not fully opaque.
    public let hasTransparency: Bool
    private let reference: OpaquePointer

    /// Whether an image of this size can be scored (else the initialiser and `score` throw
    /// `image.too_small_to_score`).
    public static func canScore(width: Int, height: Int) -> Bool { min(width, height) >= minimumSide }

    /// What `bytes` will be for a reference of this size (`alpha`: with transparency), before
    /// preparing it: 36 bytes a pixel of every scale, about 48 a pixel of the image.
    public static func estimatedBytes(width: Int, height: Int, alpha: Bool) -> Int {
        var (w, h, total) = (width, height, 36 * width * height)
        for _ in 1..<6 where w >= minimumSide && h >= minimumSide {
            (w, h) = ((w + 1) / 2, (h + 1) / 2)
            total += 36 * w * h
        }
        return total * (alpha ? 2 : 1) + 1024
    }

    /// Prepares the first frame of `image` (converted to sRGB when it is in another colour
    /// space; with its alpha, if it has an alpha channel).
    public convenience init(_ image: MagickImage) throws(HalcyonError) {
        let frame = try image.firstFrameSamples8(for: "SSIMULACRA2")
        try self.init(pixels: frame.pixels, width: frame.width, height: frame.height, channels: frame.channels)
    }

    /// Prepares the direct lane's pixels (a copy: the reference's planes are 12 times their size).
    package convenience init(_ buffer: PixelBuffer) throws(HalcyonError) {
        let pixels = Array(UnsafeBufferPointer(start: buffer.bytes, count: buffer.width * buffer.height * buffer.channels))
        try self.init(pixels: pixels, width: buffer.width, height: buffer.height, channels: buffer.channels)
    }

    /// Prepares 8-bit sRGB pixels, rows packed, `channels` 3 (RGB) or 4 (RGBA, straight alpha).
    init(pixels: [UInt8], width: Int, height: Int, channels: Int) throws(HalcyonError) {
        precondition(pixels.count == width * height * channels, "\(pixels.count) bytes for \(width)x\(height)x\(channels)")
        var prepared: OpaquePointer?
        let status = pixels.withUnsafeBufferPointer {
            hc_ssim2_reference_new($0.baseAddress, width, height, width * channels, Int32(channels), &prepared)
        }
        hasTransparency = channels == 4 && stride(from: 3, to: pixels.count, by: 4).contains { pixels[$0] != 255 }
        try Self.check(status, "prepare a \(width)x\(height) reference")
        guard let prepared else { throw HalcyonError(.internal, "SSIMULACRA2: no reference and no error") }
        self.reference = prepared
        self.width = width
        self.height = height
        self.bytes = hc_ssim2_reference_bytes(prepared)
    }

    deinit { hc_ssim2_reference_free(reference) }

    /// The score of the first frame of `image`, which must be the reference's size.
    public func score(_ image: MagickImage) throws(HalcyonError) -> Double {
        let frame = try image.firstFrameSamples8(for: "SSIMULACRA2")
        return try score(pixels: frame.pixels, width: frame.width, height: frame.height, channels: frame.channels)
    }

    /// The score of an encoded image (its first frame), decoded as `format`: AVIF by libheif, a
    /// still WebP by libwebp and JPEG XL by libjxl, with their alpha (ImageMagick 6's AVIF reader
    /// drops it; it has no JPEG XL reader), anything else by ImageMagick.
    public func score(encoded data: Data, format: ImageFormat) throws(HalcyonError) -> Double {
        if let decoded = try Self.decodeWithCodec(data, format: format, width: width, height: height) {
            return try score(pixels: decoded.pixels, width: width, height: height, channels: decoded.channels)
        }
        return try score(try MagickImage.decode(data, format: format, firstFrameOnly: true))
    }

    /// `data` decoded by its codec's own library to 8-bit RGB(A) of the expected size; nil for a
    /// format scored through ImageMagick (and an animated WebP).
    package static func decodeWithCodec(
        _ data: Data, format: ImageFormat, width: Int, height: Int
    ) throws(HalcyonError) -> (
        pixels: [UInt8], channels: Int
    )? {
        guard [.avif, .webp, .jxl].contains(format) else { return nil }
        var out: UnsafeMutablePointer<UInt8>?
        var channels: Int32 = 0
        var message = [CChar](repeating: 0, count: Int(HC_ERROR_LENGTH))
        let status = data.withUnsafeBytes { raw in
            let bytes = raw.bindMemory(to: UInt8.self).baseAddress
            return switch format {
            case .avif: hc_avif_decode(bytes, raw.count, Int32(width), Int32(height), &out, &channels, &message)
            case .jxl: hc_jxl_decode(bytes, raw.count, Int32(width), Int32(height), &out, &channels, &message)
            default: hc_webp_decode(bytes, raw.count, Int32(width), Int32(height), &out, &channels, &message)
            }
        }
        defer { hc_free(out) }
        if status == -2 { return nil }
        guard status == 0, let out else {
            let reason = message.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            throw HalcyonError(.decodeFailed, "SSIMULACRA2: cannot decode the \(format.rawValue) output to score it: \(reason)")
        }
        return (Array(UnsafeBufferPointer(start: out, count: width * height * Int(channels))), Int(channels))
    }

    /// The score of 8-bit sRGB pixels laid out as for `init(pixels:width:height:channels:)`.
    func score(pixels: [UInt8], width: Int, height: Int, channels: Int) throws(HalcyonError) -> Double {
        precondition(pixels.count == width * height * channels, "\(pixels.count) bytes for \(width)x\(height)x\(channels)")
        var result = 0.0
        let status = pixels.withUnsafeBufferPointer {
            hc_ssim2_score(reference, $0.baseAddress, width, height, width * channels, Int32(channels), &result)
        }
        try Self.check(status, "score a \(width)x\(height) image against the \(self.width)x\(self.height) reference")
        return result
    }

    private static func check(_ status: Int32, _ what: String) throws(HalcyonError) {
        switch Int(status) {
        case HC_SSIM2_OK:
            return
        case HC_SSIM2_TOO_SMALL:
            throw HalcyonError(.tooSmallToScore, "SSIMULACRA2: cannot \(what): under \(minimumSide)x\(minimumSide)")
        case HC_SSIM2_SIZE_MISMATCH:
            throw HalcyonError(.processingFailed, "SSIMULACRA2: cannot \(what): the sizes differ")
        case HC_SSIM2_NO_MEMORY:
            throw HalcyonError(.resourcesExhausted, "SSIMULACRA2: out of memory to \(what)")
        default:
            throw HalcyonError(.processingFailed, "SSIMULACRA2: cannot \(what): invalid arguments (\(status))")
        }
    }
}
