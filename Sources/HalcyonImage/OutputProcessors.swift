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
    public func work(from input: ImageSize) -> Double {
        guard isPerceptual else { return 4 * 2 * Double(input.pixels) }
        let probes = Double(QualitySearch.defaultMaxEncodes * max(1, formats.count) + OutputEncoder.halfChromaEncodes + 1)
        return Double(input.pixels) * probes * Self.probeWork
    }

    public func process(_ image: MagickImage) throws(HalcyonError) {
        if let format { image.outputFormat = format.imageFormat }
        image.outputQuality = quality
        image.progressive = progressive && (format?.canBeProgressive ?? false)
        image.pngCompression = compression
    }
}
