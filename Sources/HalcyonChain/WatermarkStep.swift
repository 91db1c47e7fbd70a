import HalcyonRuntime

/// `watermark("SOURCE", gravity=south_east, margin=16, scale=0.2, opacity=0.6)` — draws the image
/// at SOURCE (http(s), `file://` or `data:`, fetched like a job's source) over each frame:
/// `scale` times the frame's width wide (aspect kept), `margin` px in from the edges the compass
/// `gravity` names, its own alpha times `opacity`. A watermark that does not fit inside the
/// frame with its margins fails with `image.watermark_too_large`.
public struct WatermarkStep: ChainStepDefinition {
    public static let name = "watermark"
    public var source: String
    public var gravity: Gravity.Compass
    public var margin: Int
    public var scale: Double
    public var opacity: Double

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["source", "gravity", "margin", "scale", "opacity"])
        guard let s = a.take("source") else {
            throw ChainError(position: step.position, found: "'watermark' without a source", expected: "watermark(\"https://…\", …)")
        }
        guard case .string(let text) = s.value, !text.isEmpty else {
            throw ChainError(position: s.valuePosition, found: "'\(s.value)'", expected: "the watermark's source as a double-quoted string")
        }
        source = text
        gravity = try a.choice("gravity", default: Gravity.Compass.south_east)
        margin = Int(try a.number("margin", default: 16, range: 0...4096).rounded())
        scale = try a.number("scale", default: 0.2, range: 0.01...1)
        opacity = try a.number("opacity", default: 0.6, range: 0...1)
        try a.finish()
    }

    public var identifier: String {
        "watermark(\(ChainValue.string(source)),gravity=\(gravity.rawValue),margin=\(margin),scale=\(formatNumber(scale)),opacity=\(formatNumber(opacity)))"
    }

    /// The mark's size when drawn on a frame of `image`: `scale` × its width wide, aspect kept.
    package static func drawnSize(of mark: ImageSize, on image: ImageSize, scale: Double) -> ImageSize {
        let mw = max(1, Int(saturating: (Double(image.width) * scale).rounded()))
        let mh = max(1, Int(saturating: (Double(mark.height) * Double(mw) / Double(max(1, mark.width))).rounded()))
        return ImageSize(width: mw, height: mh)
    }
}
