import Foundation
import HalcyonDomain

/// `format(jpeg|png|webp|gif|avif, quality=85, progressive=false, max_bytes=none, min_quality=10,
/// compression=6)` — the output encoding (Kingfisher's `FormatIndicatedCacheSerializer`).
/// `quality` (1–100) applies to jpeg, webp and avif; `progressive` to jpeg (progressive scan) and
/// png (Adam7 interlace); `max_bytes` (with `min_quality`) to the formats with a quality;
/// `compression` (zlib's level, 0–9) to png. Parameters that mean nothing for a format, an
/// absent `max_bytes` and the default `compression` are left out of its identifier.
public struct FormatProcessor: ImageProcessor {
    public enum Format: String, Sendable, CaseIterable {
        case jpeg, png, webp, gif, avif

        var imageFormat: ImageFormat {
            switch self {
            case .jpeg: .jpeg
            case .png: .png
            case .webp: .webp
            case .gif: .gif
            case .avif: .avif
            }
        }
        var hasQuality: Bool { [.jpeg, .webp, .avif].contains(self) }
        var canBeProgressive: Bool { [.jpeg, .png].contains(self) }
    }

    /// The quality a result in `format` was encoded at, as its job records it: nil for a format
    /// the encoder gives no quality (png, gif, …).
    static func recordedQuality(_ quality: Int, of format: ImageFormat) -> Int? {
        [.jpeg, .webp, .avif].contains(format) ? quality : nil
    }
    public static let name = "format"
    public var format: Format
    public var quality: Int
    public var progressive: Bool
    /// The most bytes the output may have: the quality is lowered (a binary search, down to
    /// `minQuality`) until it fits, else `image.over_max_bytes`. Nil: no limit.
    public var maxBytes: Int?
    /// The lowest quality the search may use. Default 10, or `quality` when that is lower.
    public var minQuality = 10
    /// PNG's zlib level: 0 (stored) to 9 (smallest, slowest). The pixels are the same at every
    /// level; 6 is zlib's, libpng's and Pillow's default, and on photographs about 2–3 % larger
    /// than ImageMagick's 7 for a fifth less CPU per image.
    public var compression = FormatProcessor.defaultCompression
    public static let defaultCompression = 6

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["format", "quality", "progressive", "max_bytes", "min_quality", "compression"])
        format = try a.choice("format")
        quality = Int(try a.number("quality", default: 85, range: 1...100).rounded())
        progressive = try a.bool("progressive", default: false)
        if step.arguments.contains(where: { $0.key == "compression" }) {
            guard format == .png else {
                throw ChainError(
                    position: step.position, found: "'\(step.name)(\(format.rawValue))' with compression",
                    expected: "compression only with png")
            }
            compression = Int(try a.number("compression", range: 0...9).rounded())
        }
        let hasLimit = step.arguments.contains { $0.key == "max_bytes" }, hasFloor = step.arguments.contains { $0.key == "min_quality" }
        if hasLimit || hasFloor {
            guard format.hasQuality, hasLimit else {
                throw ChainError(
                    position: step.position, found: "'\(step.name)(\(format.rawValue))' with \(hasLimit ? "max_bytes" : "min_quality")",
                    expected: hasLimit ? "max_bytes only with a format that has a quality (jpeg, webp, avif)" : "min_quality only with max_bytes")
            }
            maxBytes = Int(try a.number("max_bytes", range: 100...100_000_000).rounded())
            // Never above the quality itself: `format(jpeg, quality=5, max_bytes=…)` searches 5 down
            // to 5, and its identifier (`min_quality=5`) parses (found by `scripts/fuzz chain`).
            minQuality = Int(try a.number("min_quality", default: Double(min(10, quality)), range: 1...Double(quality)).rounded())
        }
        try a.finish()
    }

    public var identifier: String {
        var parts = [format.rawValue]
        if format.hasQuality { parts.append("quality=\(quality)") }
        if format.canBeProgressive { parts.append("progressive=\(progressive)") }
        if compression != Self.defaultCompression { parts.append("compression=\(compression)") }
        if let maxBytes { parts += ["max_bytes=\(maxBytes)", "min_quality=\(minQuality)"] }
        return "format(\(parts.joined(separator: ",")))"
    }

    /// The output of `encode(quality)` at the highest quality from `minQuality` to `quality`
    /// that fits in `maxBytes` (a binary search: at most 9 encodes), and that quality;
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

    public func process(_ image: MagickImage) throws(HalcyonError) {
        image.outputFormat = format.imageFormat
        image.outputQuality = quality
        image.progressive = progressive && format.canBeProgressive
        image.pngCompression = compression
    }
}
