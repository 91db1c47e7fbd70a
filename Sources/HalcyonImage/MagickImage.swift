internal import CMagickWand
import Foundation
import HalcyonCore

/// One image in one MagickWand. Not thread-safe: a wand belongs to the one Dispatch thread
/// running its job's chain, from read to encode.
public final class MagickImage {
    let wand: OpaquePointer
    /// The encoding `encode()` uses; defaults to the source format.
    public var outputFormat: ImageFormat
    /// JPEG/WebP quality, 1–100.
    public var outputQuality: Int = 85

    static var genesisToken: Void { genesis }

    private static let genesis: Void = {
        MagickWandGenesis()
        // Parallelism comes from concurrent jobs, one thread per wand (FIELD-NOTES.md).
        _ = MagickSetResourceLimit(ThreadResource, 1)
    }()

    init(wand: OpaquePointer, format: ImageFormat) {
        self.wand = wand
        self.outputFormat = format
    }

    deinit { DestroyMagickWand(wand) }

    /// Reads the header only: width, height and frame count, without decoding pixels.
    public static func ping(_ data: Data, format: ImageFormat) throws(HalcyonError) -> (width: Int, height: Int) {
        _ = genesis
        let wand = NewMagickWand()!
        defer { DestroyMagickWand(wand) }
        MagickSetFormat(wand, format.magickName)
        let ok = data.withUnsafeBytes { MagickPingImageBlob(wand, $0.baseAddress, $0.count) }
        guard ok == MagickTrue else { throw Self.error(wand, .decodeFailed, "cannot read the \(format.rawValue) header") }
        return (Int(MagickGetImageWidth(wand)), Int(MagickGetImageHeight(wand)))
    }

    /// Decodes `data` as `format` (set explicitly, so the bytes cannot choose their coder).
    /// `shrinkHint` enables JPEG shrink-on-load to no less than that size on each side.
    public static func decode(_ data: Data, format: ImageFormat, shrinkHint: Int? = nil) throws(HalcyonError) -> MagickImage {
        _ = genesis
        let wand = NewMagickWand()!
        let image = MagickImage(wand: wand, format: format)
        MagickSetFormat(wand, format.magickName)
        if format == .jpeg, let hint = shrinkHint {
            MagickSetOption(wand, "jpeg:size", "\(hint)x\(hint)")
        }
        let ok = data.withUnsafeBytes { MagickReadImageBlob(wand, $0.baseAddress, $0.count) }
        guard ok == MagickTrue else { throw error(wand, .decodeFailed, "cannot decode \(format.rawValue)") }
        MagickResetIterator(wand)
        return image
    }

    public var width: Int { Int(MagickGetImageWidth(wand)) }
    public var height: Int { Int(MagickGetImageHeight(wand)) }
    public var hasAlpha: Bool { MagickGetImageAlphaChannel(wand) == MagickTrue }

    /// The colour at (x, y) as red, green, blue, alpha in 0…1 (alpha 1 = opaque).
    public func pixel(x: Int, y: Int) -> (red: Double, green: Double, blue: Double, alpha: Double) {
        let p = NewPixelWand()!
        defer { DestroyPixelWand(p) }
        MagickGetImagePixelColor(wand, x, y, p)
        return (PixelGetRed(p), PixelGetGreen(p), PixelGetBlue(p), PixelGetAlpha(p))
    }

    /// Number of frames (1 for still images).
    public var frameCount: Int { Int(MagickGetNumberImages(wand)) }

    /// Rotates and flips per the EXIF orientation, then forgets the tag.
    public func autoOrient() throws(HalcyonError) {
        guard MagickGetImageOrientation(wand) != TopLeftOrientation,
              MagickGetImageOrientation(wand) != UndefinedOrientation else { return }
        try check(MagickAutoOrientImage(wand), "auto-orient")
    }

    /// Converts to sRGB when the image is in another colour space (CMYK, grey, …).
    public func toSRGB() throws(HalcyonError) {
        let space = MagickGetImageColorspace(wand)
        guard space != sRGBColorspace, space != RGBColorspace, space != GRAYColorspace else { return }
        try check(MagickTransformImageColorspace(wand, sRGBColorspace), "convert to sRGB")
    }

    public func resize(width: Int, height: Int) throws(HalcyonError) {
        guard width != self.width || height != self.height else { return }
        try check(MagickResizeImage(wand, width, height, LanczosFilter, 1.0), "resize to \(width)x\(height)")
    }

    public func crop(width: Int, height: Int, x: Int, y: Int) throws(HalcyonError) {
        try check(MagickCropImage(wand, width, height, x, y), "crop")
        MagickResetImagePage(wand, "0x0+0+0")
    }

    /// Encodes in `outputFormat`, stripped of metadata. Transparent areas of an image going to
    /// JPEG are flattened onto white.
    public func encode() throws(HalcyonError) -> Data {
        MagickStripImage(wand)
        if outputFormat == .jpeg, hasAlpha {
            let white = NewPixelWand()
            defer { DestroyPixelWand(white) }
            PixelSetColor(white, "white")
            MagickSetImageBackgroundColor(wand, white)
            guard let flat = MagickMergeImageLayers(wand, FlattenLayer) else {
                throw Self.error(wand, .processingFailed, "flatten onto white")
            }
            ClearMagickWand(wand)
            MagickAddImage(wand, flat)
            DestroyMagickWand(flat)
        }
        // The wand-level format was set to the input coder for decoding; it would win over the
        // image's own format when writing, so both are set.
        try check(MagickSetFormat(wand, outputFormat.magickName), "set format")
        try check(MagickSetImageFormat(wand, outputFormat.magickName), "set format")
        if outputFormat == .jpeg || outputFormat == .webp {
            MagickSetImageCompressionQuality(wand, outputQuality)
        }
        var length = 0
        guard let blob = MagickGetImageBlob(wand, &length) else {
            throw Self.error(wand, .processingFailed, "encode \(outputFormat.rawValue)")
        }
        defer { MagickRelinquishMemory(blob) }
        return Data(bytes: blob, count: length)
    }

    private func check(_ ok: MagickBooleanType, _ what: String) throws(HalcyonError) {
        guard ok == MagickTrue else { throw Self.error(wand, .processingFailed, what) }
    }

    /// ImageMagick's own message for the wand's last exception.
    static func error(_ wand: OpaquePointer, _ code: ErrorCode, _ what: String) -> HalcyonError {
        var severity = UndefinedException
        var message = ""
        if let m = MagickGetException(wand, &severity) {
            message = String(cString: m)
            MagickRelinquishMemory(m)
        }
        MagickClearException(wand)
        return HalcyonError(code, message.isEmpty ? what : "\(what): \(message)")
    }
}
