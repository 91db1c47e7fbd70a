import HalcyonChain
import HalcyonDomain

extension ResizeStep: ShrinkingProcessor {
    var minimumDecodeSize: (width: Int, height: Int) { (width, height) }

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

extension DownsampleStep: ShrinkingProcessor {
    var minimumDecodeSize: (width: Int, height: Int) { (width, height) }

    public func work(from input: ImageSize) -> Double { Resampler.work(from: input, to: outputSize(from: input)) }

    public func process(_ image: MagickImage) throws(HalcyonError) {
        let s = outputSize(from: ImageSize(width: image.width, height: image.height))
        try image.resize(width: s.width, height: s.height)
    }
}

extension CropStep: ImageProcessor {
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

extension RotateStep: ImageProcessor {
    public func process(_ image: MagickImage) throws(HalcyonError) {
        if degrees != 0 { try image.rotate(degrees: degrees) }
    }
}

extension FlipStep: ImageProcessor {
    public func process(_ image: MagickImage) throws(HalcyonError) { try image.flip() }
}

extension FlopStep: ImageProcessor {
    public func process(_ image: MagickImage) throws(HalcyonError) { try image.flop() }
}

extension AutoOrientStep: ImageProcessor {
    public func process(_ image: MagickImage) throws(HalcyonError) { try image.autoOrient() }
}

/// Metadata is always stripped on output: nothing to do.
extension StripStep: ImageProcessor {
    public func process(_ image: MagickImage) throws(HalcyonError) {}
}
