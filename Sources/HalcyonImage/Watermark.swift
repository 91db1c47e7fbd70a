internal import CMagickWand
import Foundation
import HalcyonDomain
import HalcyonRuntime

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

    /// The mark's size when drawn on a frame of `image`: `scale` × its width wide, aspect kept.
    static func drawnSize(of mark: ImageSize, on image: ImageSize, scale: Double) -> ImageSize {
        let mw = max(1, Int(saturating: (Double(image.width) * scale).rounded()))
        let mh = max(1, Int(saturating: (Double(mark.height) * Double(mw) / Double(max(1, mark.width))).rounded()))
        return ImageSize(width: mw, height: mh)
    }

    /// Pixels the step holds besides the image: the mark decoded whole (a JPEG at the drawn
    /// size or a little more, counted whole all the same) and drawn.
    func markPixels(_ mark: WatermarkSource, on image: ImageSize) -> Int {
        mark.size.pixels + Self.drawnSize(of: mark.size, on: image, scale: scale).pixels
    }

    public func process(_ image: MagickImage) throws(HalcyonError) {
        guard let mark = image.watermarks[source] else {
            throw HalcyonError(.processingFailed, "the watermark \(source.prefix(200)) was not loaded")
        }
        try image.draw(mark, named: source, gravity: gravity.anchor, margin: margin, scale: scale, opacity: opacity)
    }
}

/// A fetched watermark whose header was read and checked: what a worker keeps between jobs.
/// Its pixels are decoded by each job that draws it, at the size it is drawn, inside the job's
/// processing (its slot, its pixel budget, its deadline).
public struct WatermarkSource: Sendable {
    public let data: Data
    public let format: ImageFormat
    let header: MagickImage.Header
    /// The mark's size once decoded and oriented (its first frame).
    public var size: ImageSize {
        header.swapsAxes ? ImageSize(width: header.height, height: header.width) : ImageSize(width: header.width, height: header.height)
    }

    /// Most pixels a watermark may have.
    public static let maxPixels = 16_000_000

    /// Reads and checks a fetched watermark's header, within `limits` and `maxPixels`. Blocking.
    public static func check(_ data: Data, format: ImageFormat, limits: ImageLimits = ImageLimits()) throws(HalcyonError) -> WatermarkSource {
        var own = limits
        own.maxPixels = min(limits.maxPixels, maxPixels)
        do {
            try own.checkBytes(data, format: format)
            var header = try MagickImage.ping(data, format: format)
            // Only the first frame is ever decoded.
            header.frames = 1
            header.frameSizes = Array(header.frameSizes.prefix(1))
            header.canvas = nil
            try own.check(header)
            return WatermarkSource(data: data, format: format, header: header)
        } catch {
            throw HalcyonError(error.code, "the watermark: \(error.message)", detail: error.detail)
        }
    }

    /// Decodes the first frame as sRGB with alpha, scaled to `drawn`: a JPEG shrinks on load,
    /// others are decoded whole (within the budget the plan checked) and resized at once.
    func decode(at drawn: ImageSize, cancel: CancellationFlag?) throws(HalcyonError) -> MagickImage {
        let stored = header.swapsAxes ? (drawn.height, drawn.width) : (drawn.width, drawn.height)
        let image: MagickImage
        do {
            image = try MagickImage.decode(data, format: format, shrinkHint: stored, firstFrameOnly: header.frames > 1 || format.animates)
            image.cancellation = cancel
            image.keepFirstFrame()
            try ImageLimits.checkHasPixels(ImageSize(width: image.width, height: image.height), what: "the image")
            try image.autoOrient()
            try image.toSRGB()
        } catch {
            throw HalcyonError(error.code, "the watermark: \(error.message)", detail: error.detail)
        }
        // Without an alpha channel the opacity samples are unset: make it opaque first.
        if !image.hasAlpha { MagickSetImageAlphaChannel(image.wand, SetAlphaChannel) }
        try cancel?.check()
        // ImageMagick's own Lanczos: a mark shrinks by large factors (a 4000-pixel logo drawn 100
        // wide), where its C loops beat a debug build's resampler by far; quality is the same filter.
        guard MagickResizeImage(image.wand, drawn.width, drawn.height, LanczosFilter, 1.0) == MagickTrue else {
            throw MagickImage.error(image.wand, .processingFailed, "cannot scale the watermark to \(drawn)")
        }
        return image
    }
}

extension MagickImage {
    /// Most marks kept decoded per image, each at most a sixteenth of the image's pixels: a
    /// quarter of the image at most, for a chain that draws the same marks many times.
    static let keptOverlays = 4

    /// Draws `mark` on every frame (see `WatermarkProcessor`), decoded at the size it is drawn.
    func draw(
        _ mark: WatermarkSource, named source: String, gravity anchor: (x: Double, y: Double), margin: Int, scale: Double, opacity: Double
    ) throws(HalcyonError) {
        let (w, h) = (width, height)
        let drawn = WatermarkProcessor.drawnSize(of: mark.size, on: ImageSize(width: w, height: h), scale: scale)
        let (mw, mh) = (drawn.width, drawn.height)
        guard mw + 2 * margin <= w, mh + 2 * margin <= h else {
            throw HalcyonError(
                .watermarkTooLarge,
                "the watermark at \(mw)x\(mh) with \(margin) px margins does not fit in the \(w)x\(h) image (lower scale or margin)")
        }
        let key = "\(drawn) \(source)"
        let overlay: MagickImage
        if let kept = overlays.first(where: { $0.key == key }) {
            overlay = kept.image.clone()
        } else {
            let decoded = try mark.decode(at: drawn, cancel: cancellation)
            if drawn.pixels * 16 <= w * h {
                overlays.append((key, decoded))
                if overlays.count > Self.keptOverlays { overlays.removeFirst() }
                overlay = decoded.clone()
            } else {
                overlay = decoded
            }
        }
        MagickSetImageAlphaChannel(overlay.wand, ActivateAlphaChannel)
        if opacity < 1 { _ = MagickEvaluateImageChannel(overlay.wand, AlphaChannel, MultiplyEvaluateOperator, opacity) }
        let x = margin + Int((Double(w - mw - 2 * margin) * anchor.x).rounded()), y = margin + Int((Double(h - mh - 2 * margin) * anchor.y).rounded())
        try forEachFrame("watermark") { MagickCompositeImage(wand, overlay.wand, OverCompositeOp, x, y) }
    }
}
