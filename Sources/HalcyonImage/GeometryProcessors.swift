import Foundation
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

    /// What the image is scaled to (before a fill's crop).
    func scaled(from input: ImageSize) -> ImageSize {
        let (w, h) = (Double(input.width), Double(input.height))
        switch mode {
        case .stretch:
            return ImageSize(width: width, height: height)
        case .fit:
            let k = min(Double(width) / w, Double(height) / h)
            return ImageSize(width: max(1, Int((w * k).rounded())), height: max(1, Int((h * k).rounded())))
        case .fill:
            let k = max(Double(width) / w, Double(height) / h)
            return ImageSize(width: max(width, Int((w * k).rounded())), height: max(height, Int((h * k).rounded())))
        }
    }

    public func outputSize(from input: ImageSize) -> ImageSize {
        mode == .fill ? ImageSize(width: width, height: height) : scaled(from: input)
    }

    /// The size to scale to and, for `fill`, the centred window of it to keep: a resize and a
    /// crop in one pass, so the columns the crop drops are never filtered.
    func geometry(from input: ImageSize) -> (scaled: ImageSize, window: Resampler.Window?) {
        let s = scaled(from: input)
        guard mode == .fill else { return (s, nil) }
        return (s, Resampler.Window(x: (s.width - width) / 2, y: (s.height - height) / 2, width: width, height: height))
    }

    public func process(_ image: MagickImage) throws(HalcyonError) {
        let (s, window) = geometry(from: ImageSize(width: image.width, height: image.height))
        try image.resize(width: s.width, height: s.height, window: window)
    }
}

/// `downsample(WxH)` — Kingfisher's `DownsamplingImageProcessor`: fits inside WxH keeping the
/// aspect ratio, never enlarges, and always decodes JPEGs at reduced size (shrink-on-load).
public struct DownsampleProcessor: ShrinkingProcessor {
    public static let name = "downsample"
    public var width: Int
    public var height: Int

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["size"])
        (width, height) = try a.size("size")
        try a.finish()
    }

    public var identifier: String { "downsample(\(width)x\(height))" }
    var minimumDecodeSize: (width: Int, height: Int) { (width, height) }

    public func outputSize(from input: ImageSize) -> ImageSize {
        let (w, h) = (Double(input.width), Double(input.height))
        let k = min(1, Double(width) / w, Double(height) / h)
        return ImageSize(width: max(1, Int((w * k).rounded())), height: max(1, Int((h * k).rounded())))
    }

    public func process(_ image: MagickImage) throws(HalcyonError) {
        let s = outputSize(from: ImageSize(width: image.width, height: image.height))
        try image.resize(width: s.width, height: s.height)
    }
}

/// `crop(WxH, x=0.5, y=0.5)` — Kingfisher's `CroppingImageProcessor`: a WxH region (clipped to
/// the image) whose position is an anchor: x=0 takes the left edge, 1 the right, 0.5 the centre.
public struct CropProcessor: ImageProcessor {
    public static let name = "crop"
    public var width: Int
    public var height: Int
    public var x: Double
    public var y: Double

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["size", "x", "y"])
        (width, height) = try a.size("size")
        x = try a.number("x", default: 0.5, range: 0...1)
        y = try a.number("y", default: 0.5, range: 0...1)
        try a.finish()
    }

    public var identifier: String { "crop(\(width)x\(height),x=\(formatNumber(x)),y=\(formatNumber(y)))" }

    public func outputSize(from input: ImageSize) -> ImageSize {
        ImageSize(width: min(width, input.width), height: min(height, input.height))
    }

    public func process(_ image: MagickImage) throws(HalcyonError) {
        let w = min(width, image.width), h = min(height, image.height)
        let left = Int((Double(image.width - w) * x).rounded()), top = Int((Double(image.height - h) * y).rounded())
        try image.crop(width: w, height: h, x: left, y: top)
    }
}

/// `rotate(DEG)` — clockwise; the corners a non-right angle uncovers are transparent.
public struct RotateProcessor: ImageProcessor {
    public static let name = "rotate"
    public var degrees: Double

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["degrees"])
        let d = try a.number("degrees", range: -360...360)
        degrees = d.truncatingRemainder(dividingBy: 360) < 0 ? d.truncatingRemainder(dividingBy: 360) + 360 : d.truncatingRemainder(dividingBy: 360)
        try a.finish()
    }

    public var identifier: String { "rotate(\(formatNumber(degrees)))" }

    /// The rotated frame's bounding box (and a pixel either way for ImageMagick's rounding).
    public func outputSize(from input: ImageSize) -> ImageSize {
        guard degrees.truncatingRemainder(dividingBy: 180) != 0 else { return input }
        if degrees.truncatingRemainder(dividingBy: 90) == 0 { return ImageSize(width: input.height, height: input.width) }
        let r = degrees * .pi / 180, c = abs(cos(r)), s = abs(sin(r))
        let w = Double(input.width), h = Double(input.height)
        return ImageSize(width: Int((w * c + h * s).rounded(.up)) + 2, height: Int((w * s + h * c).rounded(.up)) + 2)
    }

    public func process(_ image: MagickImage) throws(HalcyonError) {
        if degrees != 0 { try image.rotate(degrees: degrees) }
    }
}

/// `flip` (top ↔ bottom), `flop` (left ↔ right), `auto_orient` (applied at decode anyway;
/// kept so chains can say it), `strip` (metadata is always stripped on output).
public struct FlipProcessor: PlainProcessor {
    public static let name = "flip"
    init() {}
    public func process(_ image: MagickImage) throws(HalcyonError) { try image.flip() }
}

public struct FlopProcessor: PlainProcessor {
    public static let name = "flop"
    init() {}
    public func process(_ image: MagickImage) throws(HalcyonError) { try image.flop() }
}

public struct AutoOrientProcessor: PlainProcessor {
    public static let name = "auto_orient"
    init() {}
    public func process(_ image: MagickImage) throws(HalcyonError) { try image.autoOrient() }
}

public struct StripProcessor: PlainProcessor {
    public static let name = "strip"
    init() {}
    public func process(_ image: MagickImage) throws(HalcyonError) {}
}
