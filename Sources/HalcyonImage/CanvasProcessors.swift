internal import CMagickWand
import HalcyonChain
import HalcyonDomain

extension TrimStep: ImageProcessor {
    public func process(_ image: MagickImage) throws(HalcyonError) { try image.trim(fuzz: fuzz) }
}

extension PadStep: ImageProcessor {
    public func process(_ image: MagickImage) throws(HalcyonError) {
        let out = outputSize(from: ImageSize(width: image.width, height: image.height))
        try image.extend(to: out, color: color, anchor: gravity.anchor)
    }
}

extension BorderStep: ImageProcessor {
    public func process(_ image: MagickImage) throws(HalcyonError) { try image.paintBorder(width: width, color: color) }
}

extension MagickImage {
    /// Trims every frame to the bounding box of what differs from its corners' colour.
    func trim(fuzz: Double) throws(HalcyonError) {
        var range = 0
        _ = MagickGetQuantumRange(&range)
        try forEachFrame("trim") {
            let (w, h) = (MagickGetImageWidth(wand), MagickGetImageHeight(wand))
            // A copy of this frame first: ImageMagick trims a uniform frame to nothing (1×1 transparent).
            guard let probe = MagickGetImage(wand) else { return MagickFalse }
            defer { DestroyMagickWand(probe) }
            guard MagickTrimImage(probe, fuzz * Double(range)) == MagickTrue else { return MagickFalse }
            var pw = 0, ph = 0, x = 0, y = 0
            MagickGetImagePage(probe, &pw, &ph, &x, &y)
            let tw = MagickGetImageWidth(probe), th = MagickGetImageHeight(probe)
            let uniform = tw <= 1 && th <= 1 && (w > 1 || h > 1)
            guard !uniform, tw != w || th != h else { return MagickTrue }
            let ok = MagickCropImage(wand, tw, th, x, y)
            MagickResetImagePage(wand, "0x0+0+0")
            return ok
        }
    }

    /// Grows every frame's canvas to `size`, the frame placed at `anchor` (0–1 each way).
    func extend(to size: ImageSize, color: Color, anchor: (x: Double, y: Double)) throws(HalcyonError) {
        let background = Self.pixel(color)
        defer { DestroyPixelWand(background) }
        try forEachFrame("pad") {
            let w = Int(MagickGetImageWidth(wand)), h = Int(MagickGetImageHeight(wand))
            guard w < size.width || h < size.height else { return MagickTrue }
            if color.alpha < 255 { MagickSetImageAlphaChannel(wand, SetAlphaChannel) }
            MagickSetImageBackgroundColor(wand, background)
            let x = Int((Double(size.width - w) * anchor.x).rounded()), y = Int((Double(size.height - h) * anchor.y).rounded())
            let ok = MagickExtentImage(wand, size.width, size.height, -x, -y)
            MagickResetImagePage(wand, "0x0+0+0")
            return ok
        }
    }

    /// Paints a `width` px frame over every frame's edges.
    func paintBorder(width n: Int, color: Color) throws(HalcyonError) {
        let fill = Self.pixel(color)
        defer { DestroyPixelWand(fill) }
        try forEachFrame("border") {
            guard let draw = NewDrawingWand() else { return MagickFalse }
            defer { DestroyDrawingWand(draw) }
            let w = Double(MagickGetImageWidth(wand)), h = Double(MagickGetImageHeight(wand)), b = Double(n)
            DrawSetFillColor(draw, fill)
            DrawSetStrokeOpacity(draw, 0)
            DrawRectangle(draw, 0, 0, w - 1, b - 1)  // top
            DrawRectangle(draw, 0, max(b, h - b), w - 1, h - 1)  // bottom
            DrawRectangle(draw, 0, b, b - 1, h - b - 1)  // left
            DrawRectangle(draw, max(b, w - b), b, w - 1, h - b - 1)  // right
            if color.alpha < 255 { MagickSetImageAlphaChannel(wand, SetAlphaChannel) }
            return MagickDrawImage(wand, draw)
        }
    }
}
