import Foundation
import HalcyonRuntime

/// `resize(WxH, mode=fit|fill|stretch, gravity=center)` — Kingfisher's `ResizingImageProcessor`.
/// `fit` scales to fit inside WxH keeping the aspect ratio; `fill` scales to cover WxH and crops
/// to exactly WxH where `gravity` says (default the centre; see `Gravity`); `stretch` scales to
/// exactly WxH ignoring the aspect ratio. Default mode `fit`. The identifier names `gravity`
/// only when it is not `center`, so results stored before it existed keep their keys.
public struct ResizeStep: ChainStepDefinition {
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

    /// What the image is scaled to (before a fill's crop).
    package func scaled(from input: ImageSize) -> ImageSize {
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
}

/// `downsample(WxH)` — Kingfisher's `DownsamplingImageProcessor`: fits inside WxH keeping the
/// aspect ratio, never enlarges, and always decodes JPEGs at reduced size (shrink-on-load).
public struct DownsampleStep: ChainStepDefinition {
    public static let name = "downsample"
    public var width: Int
    public var height: Int

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["size"])
        (width, height) = try a.size("size")
        try a.finish()
    }

    public var identifier: String { "downsample(\(width)x\(height))" }

    public func outputSize(from input: ImageSize) -> ImageSize {
        let (w, h) = (Double(max(1, input.width)), Double(max(1, input.height)))
        let k = min(1, Double(width) / w, Double(height) / h)
        return ImageSize(width: max(1, Int(saturating: (w * k).rounded())), height: max(1, Int(saturating: (h * k).rounded())))
    }
}

/// `crop(WxH, x=0.5, y=0.5)` or `crop(WxH, gravity=…)` — Kingfisher's `CroppingImageProcessor`:
/// a WxH region (clipped to the image) whose position is an anchor (x=0 takes the left edge, 1
/// the right, 0.5 the centre) or a `Gravity`. A compass gravity is its anchor (`gravity=north`
/// is `x=0.5,y=0`, and so is its identifier); the others are named in the identifier.
public struct CropStep: ChainStepDefinition {
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
}

/// `rotate(DEG)` — clockwise; the corners a non-right angle uncovers are transparent.
public struct RotateStep: ChainStepDefinition {
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
}

/// `flip` (top ↔ bottom), `flop` (left ↔ right), `auto_orient` (applied at decode anyway;
/// kept so chains can say it), `strip` (metadata is always stripped on output).
public struct FlipStep: PlainStep {
    public static let name = "flip"
    init() {}
}

public struct FlopStep: PlainStep {
    public static let name = "flop"
    init() {}
}

public struct AutoOrientStep: PlainStep {
    public static let name = "auto_orient"
    init() {}
}

public struct StripStep: PlainStep {
    public static let name = "strip"
    init() {}
}
