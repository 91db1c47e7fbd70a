internal import CMagickWand
import Foundation
import HalcyonCore

/// `watermark("SOURCE", gravity=south_east, margin=16, scale=0.2, opacity=0.6)` — draws the image
/// at SOURCE (http(s), `file://` or `data:`, fetched like a job's source) over each frame:
/// `scale` times the frame's width wide (aspect kept), `margin` px in from the edges the compass
/// `gravity` names, its own alpha times `opacity`. A watermark that does not fit inside the
/// frame with its margins fails with `image.watermark_too_large`.
public struct WatermarkProcessor: ImageProcessor {
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

    public func process(_ image: MagickImage) throws(HalcyonError) {
        guard let mark = image.watermarks[source] else {
            throw HalcyonError(.processingFailed, "the watermark \(source.prefix(200)) was not loaded")
        }
        try image.draw(mark, gravity: gravity.anchor, margin: margin, scale: scale, opacity: opacity)
    }
}

/// A watermark decoded once (8-bit RGBA, sRGB, oriented) and shared by every job of a worker
/// that draws it.
public struct DecodedWatermark: Sendable {
    let pixels: PixelBuffer
    public var width: Int { pixels.width }
    public var height: Int { pixels.height }
    /// Bytes held.
    public var bytes: Int { pixels.width * pixels.height * 4 }

    /// Most pixels a watermark may have. Default 16 MP (64 MB decoded).
    public static let maxPixels = 16_000_000

    /// Decodes a fetched watermark, within `limits` and `maxPixels`. Blocking.
    public static func decode(_ data: Data, format: ImageFormat, limits: ImageLimits = ImageLimits()) throws(HalcyonError) -> DecodedWatermark {
        var own = limits
        own.maxPixels = min(limits.maxPixels, maxPixels)
        let header: MagickImage.Header
        do {
            try own.checkBytes(data, format: format)
            header = try MagickImage.ping(data, format: format)
            own.maxFrames = max(1, min(limits.maxFrames, header.frames))
            try own.check(header)
        } catch {
            throw HalcyonError(error.code, "the watermark: \(error.message)", detail: error.detail)
        }
        let image = try MagickImage.decode(data, format: format, firstFrameOnly: header.frames > 1)
        image.keepFirstFrame()
        try ImageLimits.checkHasPixels(ImageSize(width: image.width, height: image.height), what: "the watermark")
        try image.autoOrient()
        try image.toSRGB()
        // Without an alpha channel the opacity samples are unset: make it opaque first.
        if !image.hasAlpha { MagickSetImageAlphaChannel(image.wand, SetAlphaChannel) }
        let pixels = PixelBuffer(width: image.width, height: image.height, channels: 4)
        let ok = MagickExportImagePixels(image.wand, 0, 0, image.width, image.height, "RGBA", CharPixel, pixels.bytes)
        guard ok == MagickTrue else { throw MagickImage.error(image.wand, .decodeFailed, "the watermark's pixels") }
        return DecodedWatermark(pixels: pixels)
    }
}

extension MagickImage {
    /// Draws `mark` on every frame (see `WatermarkProcessor`).
    func draw(_ mark: DecodedWatermark, gravity anchor: (x: Double, y: Double), margin: Int, scale: Double, opacity: Double) throws(HalcyonError) {
        let (w, h) = (width, height)
        let mw = max(1, Int(saturating: (Double(w) * scale).rounded()))
        let mh = max(1, Int(saturating: (Double(mark.height) * Double(mw) / Double(max(1, mark.width))).rounded()))
        guard mw + 2 * margin <= w, mh + 2 * margin <= h else {
            throw HalcyonError(
                .watermarkTooLarge,
                "the watermark at \(mw)x\(mh) with \(margin) px margins does not fit in the \(w)x\(h) image (lower scale or margin)")
        }
        let overlay = try mark.pixels.resized(to: ImageSize(width: mw, height: mh), window: nil).magickImage(format: .png)
        MagickSetImageAlphaChannel(overlay.wand, ActivateAlphaChannel)
        if opacity < 1 { _ = MagickEvaluateImageChannel(overlay.wand, AlphaChannel, MultiplyEvaluateOperator, opacity) }
        let x = margin + Int((Double(w - mw - 2 * margin) * anchor.x).rounded()), y = margin + Int((Double(h - mh - 2 * margin) * anchor.y).rounded())
        try forEachFrame("watermark") { MagickCompositeImage(wand, overlay.wand, OverCompositeOp, x, y) }
    }
}
