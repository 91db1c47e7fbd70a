internal import CImageCodecs
internal import CMagickWand
import Foundation
import HalcyonDomain

/// PNG encoding without ImageMagick's PNG writer, where the file would be the same.
///
/// ImageMagick 6's PNG coder, as Debian builds it, holds one process-wide lock around every PNG
/// it reads or writes (libpng's setjmp is not trusted to be thread-safe), and its waiters spin:
/// two jobs encoding PNGs at once take turns and burn a core doing so (7.6 % of the CPU of W3's
/// PNG chain). For what photos become — 8-bit sRGB, more than 256 colours, not grey, alpha
/// either absent, or present with some partial values, or opaque throughout — its writer makes
/// a plain RGB or RGBA file with fixed settings; `hc_png_encode` makes that same file, byte for
/// byte (the same libpng and zlib, the same settings, ImageMagick's 8-bit rounding; tested),
/// with a libpng context of its own. Anything else — grey, ≤ 256 colours (a palette), alpha
/// only on or off (a tRNS colour), 16-bit, other colour spaces or gamma, interlacing — goes to
/// ImageMagick's writer, whose choices there are its own.
extension MagickImage {
    /// Rows of 16-bit samples exported at a time.
    static let pngBandRows = 64

    func encodeDirectPNG() throws(HalcyonError) -> Data? {
        guard MagickGetNumberImages(wand) == 1, MagickGetImageDepth(wand) == 8,
            MagickGetImageColorspace(wand) == sRGBColorspace,
            abs(MagickGetImageGamma(wand) - 1 / 2.2) < 1e-5
        else { return nil }
        let width = Int(MagickGetImageWidth(wand)), height = Int(MagickGetImageHeight(wand))
        let alpha = MagickGetImageAlphaChannel(wand) == MagickTrue
        return try Self.encodeDirectPNG(width: width, height: height, alpha: alpha, compression: pngCompression) { top, rows, samples in
            MagickExportImagePixels(wand, 0, top, width, rows, alpha ? "RGBA" : "RGB", ShortPixel, samples) == MagickTrue
        }
    }

    /// The PNG `hc_png_encode` makes of a `width` × `height` 8-bit sRGB image (at least 1×1),
    /// RGBA when `alpha`, whose 16-bit samples (ImageMagick's, map "RGB" or "RGBA") `export`
    /// writes `rows` rows at a time from row `top`, returning false when it cannot; zlib level
    /// `compression`. Nil when ImageMagick's writer would choose another colour type (≤ 256
    /// colours, grey, alpha only on or off) or an export fails. No wand involved: the fuzz target
    /// `direct` runs it on pixels of its own.
    package static func encodeDirectPNG(
        width: Int, height: Int, alpha: Bool, compression: Int,
        export: (_ top: Int, _ rows: Int, _ samples: UnsafeMutablePointer<UInt16>) -> Bool
    ) throws(HalcyonError) -> Data? {
        guard width >= 1, height >= 1 else { return nil }
        let channels = alpha ? 4 : 3
        // 8-bit pixels for libpng (half the frame's own 16-bit cache), filled from 16-bit
        // samples exported a band of rows at a time.
        var pixels = [UInt8](repeating: 0, count: width * height * channels)
        let band = min(height, Self.pngBandRows)
        var samples = [UInt16](repeating: 0, count: width * band * channels)
        var state = hc_png_survey()
        hc_png_survey_start(&state)
        for top in stride(from: 0, to: height, by: band) {
            let rows = min(band, height - top)
            guard samples.withUnsafeMutableBufferPointer({ export(top, rows, $0.baseAddress!) }) else { return nil }
            pixels.withUnsafeMutableBufferPointer {
                hc_png_prepare(&state, samples, $0.baseAddress! + top * width * channels, width * rows, Int32(channels))
            }
        }
        samples = []
        let survey = hc_png_survey_flags(&state)
        func has(_ flag: Int) -> Bool { Int(survey) & flag != 0 }
        guard has(Int(HC_PNG_MANY_COLORS)), !has(Int(HC_PNG_GREY)) else { return nil }
        // Alpha only on or off may become a tRNS colour.
        if has(Int(HC_PNG_TRANSPARENT)), !has(Int(HC_PNG_PARTIAL_ALPHA)) { return nil }
        var out: UnsafeMutablePointer<UInt8>?
        var length = 0
        let message = withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(HC_ERROR_LENGTH)) { error -> String? in
            hc_png_encode(pixels, Int32(width), Int32(height), Int32(channels), Int32(compression), &out, &length, error.baseAddress) == 0
                ? nil : String(cString: error.baseAddress!)
        }
        guard message == nil, let out else { throw HalcyonError(.processingFailed, "encode png: \(message ?? "no output")") }
        defer { hc_free(out) }
        return Data(bytes: out, count: length)
    }
}
