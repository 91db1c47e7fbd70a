import HalcyonCore

/// `format(jpeg|png|webp|gif|avif, quality=85, progressive=false)` — the output encoding
/// (Kingfisher's `FormatIndicatedCacheSerializer`). `quality` (1–100) applies to jpeg, webp and
/// avif; `progressive` to jpeg (progressive scan) and png (Adam7 interlace). Parameters that
/// mean nothing for a format are left out of its identifier.
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
    public static let name = "format"
    public var format: Format
    public var quality: Int
    public var progressive: Bool

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["format", "quality", "progressive"])
        format = try a.choice("format")
        quality = Int(try a.number("quality", default: 85, range: 1...100).rounded())
        progressive = try a.bool("progressive", default: false)
        try a.finish()
    }

    public var identifier: String {
        var parts = [format.rawValue]
        if format.hasQuality { parts.append("quality=\(quality)") }
        if format.canBeProgressive { parts.append("progressive=\(progressive)") }
        return "format(\(parts.joined(separator: ",")))"
    }

    public func process(_ image: MagickImage) throws(HalcyonError) {
        image.outputFormat = format.imageFormat
        image.outputQuality = quality
        image.progressive = progressive && format.canBeProgressive
    }
}
