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
            // Resize and centre-crop in one pass: the columns the crop drops are never filtered.
            try image.resize(width: sw, height: sh, window: .init(x: (sw - width) / 2, y: (sh - height) / 2, width: width, height: height))
        }
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

    public func process(_ image: MagickImage) throws(HalcyonError) {
        let (w, h) = (Double(image.width), Double(image.height))
        let k = min(1, Double(width) / w, Double(height) / h)
        try image.resize(width: max(1, Int((w * k).rounded())), height: max(1, Int((h * k).rounded())))
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
