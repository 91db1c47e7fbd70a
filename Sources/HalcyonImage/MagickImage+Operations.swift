internal import CImageCodecs
internal import CMagickWand
import Foundation
import HalcyonChain
import HalcyonDomain

/// The pixel operations the processors call: blur, sharpen, rotate, flips, colour, rounded
/// corners and compositing. Each runs on every frame.
extension MagickImage {
    /// Below this sigma the 2-D kernel (a few taps a side) is cheaper than two 1-D passes with
    /// their intermediate image; above it the separable passes win (measured on 640×480:
    /// sigma 0.5: 34 ms against 47; sigma 1: 99 ms against 53; sigma 4: 1,017 ms against 126).
    static let separableFromSigma = 0.75

    /// Gaussian blur. From `separableFromSigma` up, ImageMagick's `-blur`: two 1-D passes of the
    /// Gaussian (rows, then columns), the same result as the 2-D convolution of
    /// `MagickGaussianBlurImage` (PSNR ≥ 64 dB between them) at a cost that grows with sigma
    /// instead of its square (1920×1080, sigma 8: 0.35 s against 18 s). The passes run on the
    /// frame's samples (`SeparableGaussian`: bit for bit `MagickBlurImage`'s output, about three
    /// times faster); frames in other colour spaces (CMYK, Lab…) go to ImageMagick.
    public func blur(sigma: Double) throws(HalcyonError) {
        try forEachFrame("blur") {
            guard sigma >= Self.separableFromSigma else { return MagickGaussianBlurImage(wand, 0, sigma) }
            return onFrameSamples { SeparableGaussian.blur($0, width: $1, height: $2, channels: $3, sigma: sigma, cancel: cancellation) }
                ?? MagickBlurImage(wand, 0, sigma)
        }
    }

    /// Sharpens like `-sharpen 0xσ`. From `separableFromSigma` up, as an unsharp mask over the
    /// separable Gaussian (`-unsharp 0xσ+a+0`) with the amount `-sharpen`'s 2-D kernel applies:
    /// PSNR ≥ 66 dB against it, at a fraction of its time — on the frame's samples as `blur`.
    public func sharpen(sigma: Double) throws(HalcyonError) {
        let amount = Self.sharpenAmount(sigma: sigma)
        try forEachFrame("sharpen") {
            guard sigma >= Self.separableFromSigma else { return MagickSharpenImage(wand, 0, sigma) }
            return onFrameSamples {
                SeparableGaussian.unsharp($0, width: $1, height: $2, channels: $3, sigma: sigma, amount: amount, cancel: cancellation)
            }
                ?? MagickUnsharpMaskImage(wand, 0, sigma, amount, 0)
        }
    }

    /// Runs `body` on the current frame's 16-bit RGB or RGBA samples (width, height, channels;
    /// RGBA always `withAlpha`) and writes them back (false from `body`: a failure, nothing
    /// written); nil, touching nothing, for a frame in a colour space other than RGB or grey.
    /// The samples are ImageMagick's own (Q16): nothing is lost either way.
    private func onFrameSamples(
        withAlpha: Bool = false, _ body: (UnsafeMutablePointer<UInt16>, Int, Int, Int) -> Bool
    ) -> MagickBooleanType? {
        guard frameHasRGBSamples else { return nil }
        let width = Int(MagickGetImageWidth(wand)), height = Int(MagickGetImageHeight(wand))
        let alpha = withAlpha || MagickGetImageAlphaChannel(wand) == MagickTrue
        let map = alpha ? "RGBA" : "RGB", channels = alpha ? 4 : 3
        let samples = UnsafeMutablePointer<UInt16>.allocate(capacity: max(width * height * channels, 1))
        defer { samples.deallocate() }
        guard MagickExportImagePixels(wand, 0, 0, width, height, map, ShortPixel, samples) == MagickTrue else { return MagickFalse }
        guard body(samples, width, height, channels) else { return MagickFalse }
        return MagickImportImagePixels(wand, 0, 0, width, height, map, ShortPixel, samples)
    }

    /// Whether the current frame is in RGB or grey, whose samples `onFrameSamples` hands out.
    private var frameHasRGBSamples: Bool {
        let space = MagickGetImageColorspace(wand)
        return space == sRGBColorspace || space == RGBColorspace || space == GRAYColorspace
    }

    /// The amount of unsharp mask that `-sharpen 0xσ` amounts to: its kernel is 2·δ − G with
    /// G's centre tap left out, normalised by its sum 1 + g₀ (g₀ the 2-D Gaussian's centre
    /// weight), i.e. I + (I − G∗I)/(1 + g₀).
    static func sharpenAmount(sigma: Double) -> Double {
        let g0 = 1 / (2 * Double.pi * sigma * sigma)
        return 1 / (1 + min(g0, 1))
    }

    public func rotate(degrees: Double) throws(HalcyonError) {
        let none = Self.pixel(Color(red: 0, green: 0, blue: 0, alpha: 0))
        defer { DestroyPixelWand(none) }
        try forEachFrame("rotate") {
            let ok = MagickRotateImage(wand, none, degrees)
            MagickResetImagePage(wand, "0x0+0+0")
            return ok
        }
    }

    public func flip() throws(HalcyonError) { try forEachFrame("flip") { MagickFlipImage(wand) } }
    public func flop() throws(HalcyonError) { try forEachFrame("flop") { MagickFlopImage(wand) } }

    /// Paints `color` over the image with `opacity` (0…1), keeping its transparency.
    public func colorize(_ color: Color, opacity: Double) throws(HalcyonError) {
        let c = Self.pixel(color)
        let level = Int((min(max(opacity, 0), 1) * 100).rounded())
        let o = Self.pixel(named: "rgb(\(level)%,\(level)%,\(level)%)")
        defer { DestroyPixelWand(c); DestroyPixelWand(o) }
        try forEachFrame("colorize") { MagickColorizeImage(wand, c, o) }
    }

    /// brightness: added to each channel (−1…1); contrast: multiplies the distance from
    /// mid-grey; saturation: multiplies saturation (0 = grey).
    ///
    /// ImageMagick's `-modulate 100,S` (in HSL) then the polynomial `contrast·v + 0.5 − 0.5·contrast
    /// + brightness` on red, green and blue — computed on the frame's samples in one pass, the
    /// polynomial as a table of ImageMagick's own values: bit for bit its output (640×640 in
    /// W3's drain: 46 ms → 32); frames in other colour spaces are left to ImageMagick.
    public func colorControls(brightness: Double, contrast: Double, saturation: Double) throws(HalcyonError) {
        let modulate = saturation != 1, polynomial = brightness != 0 || contrast != 1
        guard modulate || polynomial else { return }
        // MagickModulateImage passes its percentages through "%g" text; the same rounding here.
        let percent = Double(String(format: "%g", saturation * 100)) ?? saturation * 100
        let coefficients = [contrast, 0.5 - 0.5 * contrast + brightness]
        let table = polynomial ? Self.polynomialTable(coefficients) : []
        try forEachFrame("color controls") {
            let done = onFrameSamples { samples, width, height, channels in
                if modulate { hc_modulate_hsl_u16(samples, width * height, Int32(channels), 100, percent, 100) }
                if polynomial { hc_map_colors_u16(samples, width * height, Int32(channels), table) }
                return true
            }
            if let done { return done }
            if modulate, MagickModulateImage(wand, 100, saturation * 100, 100) == MagickFalse { return MagickFalse }
            guard polynomial else { return MagickTrue }
            var c = coefficients
            let rgb = ChannelType(rawValue: RedChannel.rawValue | GreenChannel.rawValue | BlueChannel.rawValue)
            return MagickFunctionImageChannel(wand, rgb, PolynomialFunction, 2, &c)
        }
    }

    /// ImageMagick's `PolynomialFunction` of every 16-bit value: Horner's rule on v / 65535 in
    /// its order of operations, times 65535, rounded half up.
    static func polynomialTable(_ coefficients: [Double]) -> [UInt16] {
        (0...65535).map { v in
            var result = 0.0
            for c in coefficients { result = result * (1.0 / 65535.0) * Double(v) + c }
            result *= 65535
            return result <= 0 ? 0 : result >= 65535 ? 65535 : UInt16(result + 0.5)
        }
    }

    /// Cuts the corners to a radius; `corners` says which. Outside becomes transparent.
    ///
    /// The mask is ImageMagick's anti-aliased round rectangle, `DstIn`-composited. It differs
    /// from opaque only within ⌈r⌉ + 1 px of a corner, so it is drawn on a canvas just large
    /// enough for the four corners and applied to the frame's samples as `DstIn` applies it —
    /// the same pixels as drawing and compositing a full-size mask, which frames in colour
    /// spaces other than RGB or grey still get (800×533, r 24: 52 ms → 10).
    public func roundCorners(radius: Double, topLeft: Bool, topRight: Bool, bottomLeft: Bool, bottomRight: Bool) throws(HalcyonError) {
        let corners = (topLeft, topRight, bottomLeft, bottomRight)
        try forEachFrame("round corners") {
            let w = Int(MagickGetImageWidth(wand)), h = Int(MagickGetImageHeight(wand))
            let r = min(radius, Double(w) / 2, Double(h) / 2)
            let side = 2 * (Int(r.rounded(.up)) + 1) + 2
            let (mw, mh) = side < w && side < h ? (side, side) : (w, h)
            MagickSetImageAlphaChannel(wand, SetAlphaChannel)
            if frameHasRGBSamples {
                // The mask's alpha only (2 bytes a pixel); its wand is gone before the samples come.
                guard let mask = Self.cornerMask(width: mw, height: mh, radius: r, corners: corners) else { return MagickFalse }
                var alpha = [UInt16](repeating: 0, count: mw * mh)
                let exported = MagickExportImagePixels(mask, 0, 0, mw, mh, "A", ShortPixel, &alpha)
                DestroyMagickWand(mask)
                guard exported == MagickTrue else { return MagickFalse }
                let applied = onFrameSamples(withAlpha: true) { samples, width, height, _ in
                    hc_mask_alpha_u16(samples, Int32(width), Int32(height), alpha, Int32(mw), Int32(mh))
                    return true
                }
                if let applied { return applied }
            }
            guard let full = Self.cornerMask(width: w, height: h, radius: r, corners: corners) else { return MagickFalse }
            defer { DestroyMagickWand(full) }
            return MagickCompositeImage(wand, full, DstInCompositeOp, 0, 0)
        }
    }

    /// A `width`×`height` mask: a white round rectangle of radius `r` on transparency, the
    /// corners not in `corners` (top left, top right, bottom left, bottom right) squared off;
    /// all white for radius 0.
    static func cornerMask(width: Int, height: Int, radius r: Double, corners: (Bool, Bool, Bool, Bool)) -> OpaquePointer? {
        let w = Double(width), h = Double(height)
        guard let mask = NewMagickWand() else { return nil }
        guard let draw = NewDrawingWand() else {
            DestroyMagickWand(mask)
            return nil
        }
        defer { DestroyDrawingWand(draw) }
        let clear = pixel(Color(red: 0, green: 0, blue: 0, alpha: 0)), white = pixel(Color(red: 255, green: 255, blue: 255))
        defer { DestroyPixelWand(clear); DestroyPixelWand(white) }
        guard MagickNewImage(mask, width, height, clear) == MagickTrue else {
            DestroyMagickWand(mask)
            return nil
        }
        DrawSetFillColor(draw, white)
        // ImageMagick draws nothing for a round rectangle of radius 0.
        if r > 0 { DrawRoundRectangle(draw, 0, 0, w - 1, h - 1, r, r) } else { DrawRectangle(draw, 0, 0, w - 1, h - 1) }
        // Square off the corners that stay sharp.
        if !corners.0 { DrawRectangle(draw, 0, 0, r, r) }
        if !corners.1 { DrawRectangle(draw, w - 1 - r, 0, w - 1, r) }
        if !corners.2 { DrawRectangle(draw, 0, h - 1 - r, r, h - 1) }
        if !corners.3 { DrawRectangle(draw, w - 1 - r, h - 1 - r, w - 1, h - 1) }
        guard MagickDrawImage(mask, draw) == MagickTrue else {
            DestroyMagickWand(mask)
            return nil
        }
        return mask
    }

    /// Composites the image onto `background` (or transparency) with a blend mode and an
    /// overall opacity.
    /// Flattens the image onto an opaque `background`.
    package func flatten(onto background: Color) throws(HalcyonError) {
        try blend(OverCompositeOp, alpha: 1, background: background)
    }

    /// Resamples to exactly `width`×`height` with Halcyon's resampler.
    package func scale(width: Int, height: Int) throws(HalcyonError) {
        try resize(width: width, height: height)
    }

    func blend(_ op: CompositeOperator, alpha: Double, background: Color?) throws(HalcyonError) {
        try forEachFrame("blend") {
            let w = MagickGetImageWidth(wand), h = MagickGetImageHeight(wand)
            guard let base = NewMagickWand() else { return MagickFalse }
            defer { DestroyMagickWand(base) }
            let fill = Self.pixel(background ?? Color(red: 0, green: 0, blue: 0, alpha: 0))
            defer { DestroyPixelWand(fill) }
            guard MagickNewImage(base, w, h, fill) == MagickTrue else { return MagickFalse }
            MagickSetImageAlphaChannel(wand, SetAlphaChannel)
            if alpha < 1 {
                // Scale the image's own alpha by `alpha`.
                _ = MagickEvaluateImageChannel(wand, AlphaChannel, MultiplyEvaluateOperator, alpha)
            }
            guard MagickCompositeImage(base, wand, op, 0, 0) == MagickTrue else { return MagickFalse }
            return MagickSetImage(wand, base)  // replaces the current frame
        }
    }
}
