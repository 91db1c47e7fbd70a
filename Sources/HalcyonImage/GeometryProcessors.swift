import Foundation
import HalcyonDomain
import HalcyonRuntime

/// `resize(WxH, mode=fit|fill|stretch, gravity=center)` — Kingfisher's `ResizingImageProcessor`.
/// `fit` scales to fit inside WxH keeping the aspect ratio; `fill` scales to cover WxH and crops
/// to exactly WxH where `gravity` says (default the centre; see `Gravity`); `stretch` scales to
/// exactly WxH ignoring the aspect ratio. Default mode `fit`. The identifier names `gravity`
/// only when it is not `center`, so results stored before it existed keep their keys.
public struct ResizeProcessor: ShrinkingProcessor {
    public enum Mode: String, Sendable, CaseIterable { case fit, fill, stretch }
    public static let name = "resize"
    public var width: Int
    public var height: Int
    public var mode: Mode
    public var gravity: Gravity = .anchor(.center)

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["size", "mode", "gravity"])
        (width, height) = try a.size("size")
        mode = try a.choice("mode", default: Mode.fit)
        if let g = try a.gravity("gravity") {
            guard mode == .fill else {
                let at = step.arguments.first { $0.key == "gravity" }?.position ?? step.position
                throw ChainError(
                    position: at, found: "gravity with mode=\(mode.rawValue)", expected: "gravity only with mode=fill (nothing is cropped otherwise)")
            }
            gravity = g
        }
        try a.finish()
    }

    public var identifier: String {
        gravity == .anchor(.center)
            ? "resize(\(width)x\(height),mode=\(mode.rawValue))" : "resize(\(width)x\(height),mode=\(mode.rawValue),gravity=\(gravity))"
    }

    var minimumDecodeSize: (width: Int, height: Int) { (width, height) }

    /// What the image is scaled to (before a fill's crop).
    func scaled(from input: ImageSize) -> ImageSize {
        // Images are at least 1×1 (refused from their headers otherwise); the floor keeps this
        // arithmetic finite whatever it is given.
        let (w, h) = (Double(max(1, input.width)), Double(max(1, input.height)))
        switch mode {
        case .stretch:
            return ImageSize(width: width, height: height)
        case .fit:
            let k = min(Double(width) / w, Double(height) / h)
            return ImageSize(width: max(1, Int(saturating: (w * k).rounded())), height: max(1, Int(saturating: (h * k).rounded())))
        case .fill:
            let k = max(Double(width) / w, Double(height) / h)
            return ImageSize(width: max(width, Int(saturating: (w * k).rounded())), height: max(height, Int(saturating: (h * k).rounded())))
        }
    }

    public func outputSize(from input: ImageSize) -> ImageSize {
        mode == .fill ? ImageSize(width: width, height: height) : scaled(from: input)
    }

    public func work(from input: ImageSize) -> Double { Resampler.work(from: input, to: scaled(from: input)) }

    /// The size to scale to and, for `fill`, the window of it to keep: a resize and a crop in
    /// one pass, so the columns the crop drops are never filtered. `thumb` (the input scaled
    /// down) is read only by the gravities that look at pixels.
    func geometry(from input: ImageSize, thumb: Thumbnail? = nil) -> (scaled: ImageSize, window: Resampler.Window?) {
        let s = scaled(from: input)
        guard mode == .fill else { return (s, nil) }
        let size = ImageSize(width: width, height: height)
        let o: (x: Int, y: Int) =
            gravity == .anchor(.center)
            ? ((s.width - width) / 2, (s.height - height) / 2)  // as before gravity existed: rounded down
            : thumb.map { SmartCrop.origin(gravity, window: size, in: s, thumb: $0) } ?? gravity.origin(of: size, in: s)
        return (s, Resampler.Window(x: o.x, y: o.y, width: width, height: height))
    }

    public func process(_ image: MagickImage) throws(HalcyonError) {
        let thumb = mode == .fill && gravity.readsPixels ? try Thumbnail(image, maxSide: SmartCrop.analysisSide) : nil
        let (s, window) = geometry(from: ImageSize(width: image.width, height: image.height), thumb: thumb)
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
        let (w, h) = (Double(max(1, input.width)), Double(max(1, input.height)))
        let k = min(1, Double(width) / w, Double(height) / h)
        return ImageSize(width: max(1, Int(saturating: (w * k).rounded())), height: max(1, Int(saturating: (h * k).rounded())))
    }

    public func work(from input: ImageSize) -> Double { Resampler.work(from: input, to: outputSize(from: input)) }

    public func process(_ image: MagickImage) throws(HalcyonError) {
        let s = outputSize(from: ImageSize(width: image.width, height: image.height))
        try image.resize(width: s.width, height: s.height)
    }
}

/// `crop(WxH, x=0.5, y=0.5)` or `crop(WxH, gravity=…)` — Kingfisher's `CroppingImageProcessor`:
/// a WxH region (clipped to the image) whose position is an anchor (x=0 takes the left edge, 1
/// the right, 0.5 the centre) or a `Gravity`. A compass gravity is its anchor (`gravity=north`
/// is `x=0.5,y=0`, and so is its identifier); the others are named in the identifier.
public struct CropProcessor: ImageProcessor {
    public static let name = "crop"
    public var width: Int
    public var height: Int
    public var x: Double
    public var y: Double
    /// A focal point or a pixel-judged gravity; nil when `x`, `y` place the window.
    public var gravity: Gravity?

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["size", "x", "y", "gravity"])
        (width, height) = try a.size("size")
        let anchored = step.arguments.contains { $0.key == "x" || $0.key == "y" } || step.arguments.filter { $0.key == nil }.count > 1
        x = try a.number("x", default: 0.5, range: 0...1)
        y = try a.number("y", default: 0.5, range: 0...1)
        switch try a.gravity("gravity") {
        case nil: break
        case let g? where anchored:
            let at = step.arguments.first { $0.key == "gravity" }?.position ?? step.position
            throw ChainError(position: at, found: "gravity=\(g) with x/y", expected: "either x and y or gravity")
        case .anchor(let c)?: (x, y) = c.anchor
        case let g?: gravity = g
        }
        try a.finish()
    }

    public var identifier: String {
        if let gravity { return "crop(\(width)x\(height),gravity=\(gravity))" }
        return "crop(\(width)x\(height),x=\(formatNumber(x)),y=\(formatNumber(y)))"
    }

    public func outputSize(from input: ImageSize) -> ImageSize {
        ImageSize(width: min(width, input.width), height: min(height, input.height))
    }

    public func process(_ image: MagickImage) throws(HalcyonError) {
        let size = ImageSize(width: image.width, height: image.height)
        let window = outputSize(from: size)
        let origin: (x: Int, y: Int)
        switch gravity {
        case let g? where g.readsPixels:
            origin = SmartCrop.origin(g, window: window, in: size, thumb: try Thumbnail(image, maxSide: SmartCrop.analysisSide))
        case let g?:
            origin = g.origin(of: window, in: size)
        case nil:
            origin = (Int((Double(size.width - window.width) * x).rounded()), Int((Double(size.height - window.height) * y).rounded()))
        }
        try image.crop(width: window.width, height: window.height, x: origin.x, y: origin.y)
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
