import HalcyonCore

/// `resize(WxH, mode=fit|fill|stretch)` — Kingfisher's `ResizingImageProcessor`. `fit` scales
/// to fit inside WxH keeping the aspect ratio; `fill` scales to cover WxH and centre-crops to
/// exactly WxH; `stretch` scales to exactly WxH ignoring the aspect ratio. Default mode `fit`.
public struct ResizeProcessor: ShrinkingProcessor {
    public enum Mode: String, Sendable, CaseIterable { case fit, fill, stretch }
    public static let name = "resize"
    public var width: Int
    public var height: Int
    public var mode: Mode

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["size", "mode"])
        (width, height) = try a.size("size")
        mode = try a.choice("mode", default: Mode.fit)
        try a.finish()
    }

    public var identifier: String { "resize(\(width)x\(height),mode=\(mode.rawValue))" }

    var minimumDecodeSize: (width: Int, height: Int) { (width, height) }

    public func process(_ image: MagickImage) throws(HalcyonError) {
        let (w, h) = (Double(image.width), Double(image.height))
        switch mode {
        case .stretch:
            try image.resize(width: width, height: height)
        case .fit:
            let k = min(Double(width) / w, Double(height) / h)
            try image.resize(width: max(1, Int((w * k).rounded())), height: max(1, Int((h * k).rounded())))
        case .fill:
            let k = max(Double(width) / w, Double(height) / h)
            let sw = max(width, Int((w * k).rounded())), sh = max(height, Int((h * k).rounded()))
            try image.resize(width: sw, height: sh)
            try image.crop(width: width, height: height, x: (sw - width) / 2, y: (sh - height) / 2)
        }
    }
}

/// `format(jpeg|png|webp, quality=Q)` — the output encoding (Kingfisher's
/// `FormatIndicatedCacheSerializer`). `quality` (1–100, default 85) applies to jpeg and webp and
/// is left out of the identifier for png, where it means nothing.
public struct FormatProcessor: ImageProcessor {
    public enum Format: String, Sendable, CaseIterable {
        case jpeg, png, webp

        var imageFormat: ImageFormat {
            switch self {
            case .jpeg: .jpeg
            case .png: .png
            case .webp: .webp
            }
        }
    }
    public static let name = "format"
    public var format: Format
    public var quality: Int

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["format", "quality"])
        format = try a.choice("format")
        quality = Int(try a.number("quality", default: 85, range: 1...100).rounded())
        try a.finish()
    }

    public var identifier: String {
        format == .png ? "format(png)" : "format(\(format.rawValue),quality=\(quality))"
    }

    public func process(_ image: MagickImage) throws(HalcyonError) {
        image.outputFormat = format.imageFormat
        image.outputQuality = quality
    }
}
