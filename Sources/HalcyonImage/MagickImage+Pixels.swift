internal import CMagickWand
import HalcyonChain
import HalcyonDomain

/// A frame's pixels read out as 8-bit samples: what the placeholder encoders and the perceptual
/// metric take.
extension MagickImage {
    /// The current image of `wand`, rows packed: RGBA (straight alpha) when it has an alpha
    /// channel, else RGB (`channels` 4 or 3). Without an alpha channel an image's opacity samples
    /// are not kept up (a resize leaves them unset): only RGB is read then. Grey comes out as
    /// R = G = B; ImageMagick rounds its 16-bit samples to 8 bits.
    static func samples8(_ wand: OpaquePointer, _ what: String) throws(HalcyonError) -> (pixels: [UInt8], channels: Int) {
        let width = Int(MagickGetImageWidth(wand)), height = Int(MagickGetImageHeight(wand))
        let alpha = MagickGetImageAlphaChannel(wand) == MagickTrue
        let channels = alpha ? 4 : 3
        var pixels = [UInt8](repeating: 255, count: width * height * channels)
        let ok = pixels.withUnsafeMutableBytes {
            MagickExportImagePixels(wand, 0, 0, width, height, alpha ? "RGBA" : "RGB", CharPixel, $0.baseAddress)
        }
        guard ok == MagickTrue else { throw error(wand, .processingFailed, "\(what): export pixels") }
        return (pixels, channels)
    }

    /// The first frame's 8-bit samples (RGB, or RGBA with an alpha channel), box-averaged to
    /// `size` first when it differs (a copy of that frame is scaled: the image is not changed,
    /// and a copy of a whole animation could double its memory). `what` names the caller in errors.
    func firstFrameSamples8(scaledTo size: ImageSize, for what: String) throws(HalcyonError) -> (pixels: [UInt8], channels: Int) {
        MagickSetFirstIterator(wand)
        guard let copy = MagickGetImage(wand) else { throw HalcyonError(.processingFailed, "\(what): copy the first frame") }
        defer { DestroyMagickWand(copy) }
        if size.width != width || size.height != height {
            guard MagickScaleImage(copy, size.width, size.height) == MagickTrue else {
                throw MagickImage.error(copy, .processingFailed, "\(what): scale")
            }
        }
        return try MagickImage.samples8(copy, what)
    }

    /// The first frame's size.
    var firstFrameSize: (width: Int, height: Int) {
        MagickSetFirstIterator(wand)
        return (width, height)
    }

    /// Rows `first ..< first + count` of the first frame as 8-bit RGB, packed, into `buffer`
    /// (`count` × width × 3 bytes), as ImageMagick holds them (no colour conversion).
    func firstFrameRows8(_ first: Int, _ count: Int, into buffer: UnsafeMutableRawPointer, for what: String) throws(HalcyonError) {
        MagickSetFirstIterator(wand)
        guard MagickExportImagePixels(wand, 0, first, width, count, "RGB", CharPixel, buffer) == MagickTrue else {
            throw Self.error(wand, .processingFailed, "\(what): export rows \(first)..<\(first + count)")
        }
    }

    /// The first frame's 8-bit samples in sRGB, rows packed, RGB or RGBA (a converted copy for a
    /// frame in CMYK, Lab, YCbCr, …). `what` names the caller in errors.
    package func firstFrameSamples8(for what: String) throws(HalcyonError) -> (pixels: [UInt8], width: Int, height: Int, channels: Int) {
        try frameSamples8(0, for: what)
    }

    /// The same for frame `index` (0 ..< `frameCount`).
    func frameSamples8(_ index: Int, for what: String) throws(HalcyonError) -> (pixels: [UInt8], width: Int, height: Int, channels: Int) {
        guard index >= 0, index < frameCount, MagickSetIteratorIndex(wand, index) == MagickTrue else {
            throw HalcyonError(.processingFailed, "\(what): no frame \(index) of \(frameCount)")
        }
        let space = MagickGetImageColorspace(wand)
        var frame = wand
        var copy: OpaquePointer?
        defer { if let copy { DestroyMagickWand(copy) } }
        if space != sRGBColorspace, space != RGBColorspace, space != GRAYColorspace {
            guard let made = MagickGetImage(wand) else { throw HalcyonError(.processingFailed, "\(what): copy frame \(index)") }
            copy = made
            guard MagickTransformImageColorspace(made, sRGBColorspace) == MagickTrue else {
                throw Self.error(made, .processingFailed, "\(what): convert to sRGB")
            }
            frame = made
        }
        let (pixels, channels) = try Self.samples8(frame, what)
        return (pixels, Int(MagickGetImageWidth(frame)), Int(MagickGetImageHeight(frame)), channels)
    }
}
