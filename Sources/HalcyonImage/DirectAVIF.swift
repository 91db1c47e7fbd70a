internal import CImageCodecs
internal import CMagickWand
import Foundation
import HalcyonDomain

/// AVIF encoding through libheif directly.
///
/// ImageMagick 6's heic writer reads the quality only from the wand (not the image), converts
/// to YCbCr itself and hands libheif subsampled planes: on 800-px photographs its output tops
/// out near SSIMULACRA2 82 whatever the quality, where libheif given RGB reaches 88 at quality
/// 90 in fewer bytes. Here libheif gets the 8-bit RGB(A) pixels and does the conversion.
extension MagickImage {
    /// The first frame as an AVIF at `outputQuality` (4:4:4 chroma when `chroma` is `.full`).
    func encodeAVIF() throws(HalcyonError) -> Data {
        let frame = try firstFrameSamples8(for: "encode avif")
        return try Self.encodeAVIF(
            frame.pixels, width: frame.width, height: frame.height, channels: frame.channels, quality: outputQuality,
            fullChroma: chroma == .full)
    }

    /// aom's speed (0 slowest … 9 fastest) for every AVIF, searched or not: the bytes stored are
    /// the bytes scored. Measured on the 14 public photographs at 800 px (one thread, CPU per
    /// encode, bytes at equal SSIMULACRA2 75–84 against libheif's default 6): speed 5 0.94× the
    /// bytes for 4.1× the CPU, 7 1.04–1.07× for 0.54×, 8 1.06–1.09× for 0.35× (138 ms an encode
    /// against 398), 9 1.14–1.22× for 0.10×. 8, as imgproxy's default: a third of the CPU of a
    /// `format(auto)` search for a few per cent of AVIF's lead over JPEG.
    package static let avifSpeed = 8

    /// 8-bit sRGB pixels (rows packed, `channels` 3 or 4) as an AVIF at `speed`, one encoder thread.
    package static func encodeAVIF(
        _ pixels: [UInt8], width: Int, height: Int, channels: Int, quality: Int, fullChroma: Bool, speed: Int = avifSpeed
    ) throws(HalcyonError) -> Data {
        try CodecOutput.take("encode avif", library: "libheif") { out, size, message in
            pixels.withUnsafeBufferPointer {
                hc_avif_encode(
                    $0.baseAddress, Int32(width), Int32(height), width * channels, Int32(channels), Int32(min(max(quality, 1), 100)),
                    fullChroma ? 1 : 0, Int32(min(max(speed, 0), 9)), 1, out, size, message)
            }
        }
    }
}
