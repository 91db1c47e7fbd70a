import Foundation
import HalcyonChain
import HalcyonDomain

extension FormatStep: ImageProcessor {
    /// Pixels of the budget (`--max-pixels`) one scored output pixel holds: the metric's
    /// reference planes, 48 bytes a pixel and twice that with transparency, against the
    /// budget's 20 bytes a pixel.
    static let scoredPixelCost = 5
    /// The work of one encode, decode and score, per output pixel, in pixel-taps: about 100 ns
    /// a pixel here (the metric's ~50 ms a megapixel, the codecs' ~30–50).
    static let probeWork = 100.0

    /// The output of `encode(quality)` at the highest quality from `minQuality` to `quality`
    /// that fits in `maxBytes` (a binary search: at most 9 encodes), with that quality;
    /// `encode(quality)` itself without a limit. Larger than `maxBytes` even at `minQuality`:
    /// `image.over_max_bytes`.
    static func encode(
        fitting maxBytes: Int?, quality: Int, minQuality: Int, _ encode: (Int) throws(HalcyonError) -> Data
    ) throws(HalcyonError) -> (data: Data, quality: Int) {
        let first = try encode(quality)
        guard let maxBytes, first.count > maxBytes else { return (first, quality) }
        var best = (data: try encode(minQuality), quality: minQuality)
        guard best.data.count <= maxBytes else {
            throw HalcyonError(
                .overMaxBytes, "\(best.data.count) bytes at quality \(minQuality), the lowest allowed, is over max_bytes=\(maxBytes)")
        }
        var (low, high) = (minQuality + 1, quality - 1)
        while low <= high {
            let mid = (low + high) / 2
            let data = try encode(mid)
            if data.count <= maxBytes {
                (best, low) = ((data, mid), mid + 1)
            } else {
                high = mid - 1
            }
        }
        return best
    }

    /// A perceptual step's search: up to `QualitySearch.defaultMaxEncodes` encodes, each decoded
    /// and scored, per format it may choose, JPEG's at 4:2:0 too (plus the reference, prepared once).
    /// A JPEG XL encode costs more, by effort and lossless or not (`jxlEncodeWork`); with
    /// `max_bytes`, up to 9 of them.
    public func work(from input: ImageSize) -> Double {
        let pixels = Double(input.pixels)
        let jxl =
            formats.contains(.jxl) ? Self.jxlEncodeWork(Self.jxlEffort(effort, for: input.pixels), lossless: writesLosslessJXL) : 0
        guard isPerceptual else { return pixels * (4 * 2 + jxl * (maxBytes == nil ? 1 : 9)) }
        let probes = Double(QualitySearch.defaultMaxEncodes * max(1, formats.count) + OutputEncoder.halfChromaEncodes + 1)
        return pixels * (probes * Self.probeWork + Double(QualitySearch.defaultMaxEncodes) * jxl)
    }

    /// A JPEG recompressed as JPEG XL (`ProcessorChain.recompression`): libjxl 0.7 takes about
    /// 75 ns a pixel at effort 7 (0.9 s for 12 megapixels, 3.4 s for 48) and 2,600 at 9.
    func recompressionWork(from input: ImageSize) -> Double {
        Double(input.pixels) * (Self.jxlEffort(effort, for: input.pixels) > Self.defaultEffort ? 2600 : 100)
    }

    /// Pixels of the budget one pixel of a recompressed JPEG holds: libjxl 0.7 held about 22 bytes
    /// a pixel (1.0 GB for 48 megapixels).
    static let jxlRecompressionPixelCost = 2

    /// Whether the output is a lossless JPEG XL (`lossless=true`, or a fixed quality of 100).
    var writesLosslessJXL: Bool { format == .jxl && minScore == nil && quality >= 100 }

    /// One JPEG XL encode's work per pixel, in pixel-taps (about a nanosecond each), as libjxl 0.7
    /// takes on one core (photographs, 0.5–12 megapixels): lossy about 100 ns a pixel at efforts
    /// 1–4, 230 at 5–6, 380 at 7, 2,750 at 8 and 5,250 at 9; lossless 280 at 3, 1,550 at 5,
    /// 2,500–4,600 at 7 and 26,000–46,000 at 9.
    static func jxlEncodeWork(_ effort: Int, lossless: Bool) -> Double {
        switch (effort, lossless) {
        case (...4, false): 100
        case (5...6, false): 250
        case (7, false): 400
        case (8, false): 3000
        case (_, false): 5500
        case (...3, true): 400
        case (4...6, true): 2000
        case (7, true): 4600
        case (8, true): 25000
        case (_, true): 47000
        }
    }

    /// Pixels of the budget one JPEG XL output pixel holds while libjxl encodes it: lossy, about
    /// 48 bytes a pixel up to effort 7 (a 12-megapixel photograph, 549 MB with its 8-bit copy)
    /// and 260–290 at 8 and 9 (1 megapixel at 9: 287 MB); lossless about 80 up to 7 and 150 at
    /// 9 — against the budget's 20 bytes a pixel.
    static func jxlPixelCost(_ effort: Int, lossless: Bool) -> Int {
        switch (effort > defaultEffort, lossless) {
        case (false, false): 3
        case (false, true): 4
        case (true, false): 15
        case (true, true): 8
        }
    }

    public func process(_ image: MagickImage) throws(HalcyonError) {
        if let format { image.outputFormat = format.imageFormat }
        image.outputQuality = quality
        image.progressive = progressive && (format?.canBeProgressive ?? false)
        image.pngCompression = compression
        image.jxlEffort = effort
    }
}
