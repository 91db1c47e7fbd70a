internal import CMagickWand
import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonRuntime

extension WatermarkStep: ImageProcessor {
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

    /// Draws `mark` on every frame (see `WatermarkStep`), decoded at the size it is drawn.
    func draw(
        _ mark: WatermarkSource, named source: String, gravity anchor: (x: Double, y: Double), margin: Int, scale: Double, opacity: Double
    ) throws(HalcyonError) {
        let (w, h) = (width, height)
        let drawn = WatermarkStep.drawnSize(of: mark.size, on: ImageSize(width: w, height: h), scale: scale)
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
