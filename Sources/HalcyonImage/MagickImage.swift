internal import CMagickWand
import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonRuntime

/// One image in one MagickWand. Not thread-safe: a wand belongs to the one Dispatch thread
/// running its job's chain, from read to encode.
public final class MagickImage {
    package let wand: OpaquePointer
    /// The encoding `encode()` uses; defaults to the source format.
    public var outputFormat: ImageFormat
    /// JPEG/WebP quality, 1–100.
    public var outputQuality: Int = 85
    /// PNG's zlib level, 0–9 (`format(png, compression=…)`; ImageMagick's own default is 7).
    public var pngCompression = FormatStep.defaultCompression
    /// JPEG XL's effort as the step asks it, 1–9 (lowered for large outputs when encoding).
    public var jxlEffort = FormatStep.defaultEffort
    /// Raised when the job is abandoned: Halcyon's own loops (each frame, each band of a
    /// resize) stop at their next check; an ImageMagick call runs to its end.
    var cancellation: CancellationFlag?
    /// The decoded watermarks `watermark` steps draw, by source.
    var watermarks: [String: WatermarkSource] = [:]
    /// Marks this image has drawn, decoded at their drawn size, by source and size: a chain that
    /// draws one mark several times decodes it once (small ones only, see `draw`). Not shared
    /// with clones.
    var overlays: [(key: String, image: MagickImage)] = []

    package static var genesisToken: Void { genesis }

    /// The directory whose `policy.xml` ImageMagick loaded (Halcyon's hardened policy), or nil
    /// when it was not found and only the system policy applies.
    public static var policyDirectory: String? {
        _ = genesis
        return ProcessInfo.processInfo.environment["MAGICK_CONFIGURE_PATH"]
    }

    /// Why Halcyon's hardened policy cannot be put in place as asked — `HALCYON_POLICY_DIR`
    /// names a directory without `policy.xml` — or nil. A worker refuses to start with it
    /// (`WorkerConfiguration.validate()`); ImageMagick then runs under the system policy only.
    /// Found without starting ImageMagick. (An operator's own `MAGICK_CONFIGURE_PATH` wins, and
    /// then the variable is not used.)
    public static var policyProblem: String? {
        if !configurePathIsSet, case .failure(let error) = policyLookup { return error.description }
        return nil
    }

    /// Whether `MAGICK_CONFIGURE_PATH` is set (and not empty): an operator's own configuration.
    private static var configurePathIsSet: Bool { !(ProcessInfo.processInfo.environment["MAGICK_CONFIGURE_PATH"] ?? "").isEmpty }

    /// Where `policy.xml` is: `HALCYON_POLICY_DIR` (which must hold it), else beside the binary.
    private static let policyLookup: Result<URL?, ResourceLocator.Misdirected> = Result { () throws(ResourceLocator.Misdirected) in
        try ResourceLocator.find(
            "policy", marker: "policy.xml", environment: "HALCYON_POLICY_DIR", expected: "Halcyon's hardened ImageMagick policy (policy.xml)"
        ).found
    }

    private static let genesis: Void = {
        // The hardened policy must be in place before ImageMagick reads its configuration.
        if !configurePathIsSet, case .success(let dir?) = policyLookup {
            setenv("MAGICK_CONFIGURE_PATH", dir.path, 1)
        }
        MagickWandGenesis()
        // Parallelism comes from concurrent jobs, one thread per wand (FIELD-NOTES.md).
        _ = MagickSetResourceLimit(ThreadResource, 1)
    }()

    package init(wand: OpaquePointer, format: ImageFormat) {
        self.wand = wand
        self.outputFormat = format
    }

    deinit { DestroyMagickWand(wand) }

    /// What the header says, read without decoding pixels.
    public struct Header: Sendable {
        /// The first frame's size.
        public var width: Int
        public var height: Int
        public var frames: Int
        /// EXIF orientation 5–8 swap width and height when applied.
        public var swapsAxes: Bool
        /// Every frame's own size (a GIF's later frames may be larger than its first).
        public var frameSizes: [ImageSize] = []
        /// The canvas an animation's frames are coalesced onto (its logical screen), when
        /// larger than the first frame.
        public var canvas: ImageSize? = nil

        /// A header as a reader found it (ImageMagick's ping, the direct lane's, a fuzz target's).
        package init(width: Int, height: Int, frames: Int, swapsAxes: Bool, frameSizes: [ImageSize] = [], canvas: ImageSize? = nil) {
            self.width = width
            self.height = height
            self.frames = frames
            self.swapsAxes = swapsAxes
            self.frameSizes = frameSizes
            self.canvas = canvas
        }

        /// The size of each frame once decoded, coalesced and oriented.
        public var decodedFrameSize: ImageSize {
            var w = width, h = height
            if frames > 1, let canvas { w = max(w, canvas.width); h = max(h, canvas.height) }
            return swapsAxes ? ImageSize(width: h, height: w) : ImageSize(width: w, height: h)
        }
    }

    /// Reads the headers of every frame, without decoding pixels.
    public static func ping(_ data: Data, format: ImageFormat) throws(HalcyonError) -> Header {
        _ = genesis
        try refuseUndecoded(format)
        let wand = NewMagickWand()!
        defer { DestroyMagickWand(wand) }
        MagickSetFormat(wand, format.magickName)
        let ok = data.withUnsafeBytes { MagickPingImageBlob(wand, $0.baseAddress, $0.count) }
        // A ping allocates no pixels: a resource limit it hits is this image's own doing.
        guard ok == MagickTrue else {
            throw Self.error(wand, .decodeFailed, "cannot read the \(format.rawValue) header", resourceLimit: .imageTooLarge)
        }
        var sizes: [ImageSize] = []
        MagickResetIterator(wand)
        while MagickNextImage(wand) == MagickTrue {
            sizes.append(ImageSize(width: Int(MagickGetImageWidth(wand)), height: Int(MagickGetImageHeight(wand))))
        }
        MagickSetFirstIterator(wand)
        var pageWidth = 0, pageHeight = 0, x = 0, y = 0
        MagickGetImagePage(wand, &pageWidth, &pageHeight, &x, &y)
        let orientation = MagickGetImageOrientation(wand)
        let swaps = [LeftTopOrientation, RightTopOrientation, RightBottomOrientation, LeftBottomOrientation].contains(orientation)
        let first = sizes.first ?? ImageSize(width: Int(MagickGetImageWidth(wand)), height: Int(MagickGetImageHeight(wand)))
        return Header(
            width: first.width, height: first.height, frames: max(1, sizes.count), swapsAxes: swaps, frameSizes: sizes,
            canvas: pageWidth > 0 && pageHeight > 0 ? ImageSize(width: pageWidth, height: pageHeight) : nil)
    }

    /// Only formats Halcyon decodes reach ImageMagick's readers (a JPEG XL is written only).
    private static func refuseUndecoded(_ format: ImageFormat) throws(HalcyonError) {
        guard format.isDecoded else {
            throw HalcyonError(.unsupportedFormat, "a \(format.rawValue) image: Halcyon decodes \(ImageFormat.supportedNames)")
        }
    }

    /// Decodes `data` as `format` (set explicitly, so the bytes cannot choose their coder).
    /// `shrinkHint` (JPEG only) lets the decoder reduce the image, never below that size.
    /// `firstFrameOnly`: the coder reads the first frame (page, layer) and nothing else — for a
    /// still output, a multi-page file's other pages are never decoded. Animations are
    /// coalesced into full frames.
    public static func decode(
        _ data: Data, format: ImageFormat, shrinkHint: (width: Int, height: Int)? = nil, firstFrameOnly: Bool = false
    ) throws(HalcyonError) -> MagickImage {
        _ = genesis
        try refuseUndecoded(format)
        // The object owns the wand from here on; its deinit destroys it on every path.
        let image = MagickImage(wand: NewMagickWand()!, format: format)
        let wand = image.wand
        MagickSetFormat(wand, format.magickName)
        // A scene range in the "file name" is how ImageMagick is told which frames to read
        // (image_info's scene and number_scenes); a blob has no other name.
        if firstFrameOnly { MagickSetFilename(wand, "\(format.magickName.lowercased()):source[0]") }
        if format == .jpeg, let hint = shrinkHint {
            MagickSetOption(wand, "jpeg:size", "\(hint.width)x\(hint.height)")
        }
        let ok = data.withUnsafeBytes { MagickReadImageBlob(wand, $0.baseAddress, $0.count) }
        // The name's coder prefix would also pick the coder of every later write (a GIF's first
        // frame encoded "as JPEG" came out a GIF under a .jpg name): it names nothing after the read.
        if firstFrameOnly { MagickSetFilename(wand, "") }
        // A read that succeeds can still report an error of its own (a coder that gave up part
        // way and returned what it had): that is a failure too, as is an image of no pixels.
        guard ok == MagickTrue, MagickGetExceptionType(wand).rawValue < ErrorException.rawValue else {
            throw error(wand, .decodeFailed, "cannot decode \(format.rawValue)")
        }
        try ImageLimits.checkHasPixels(ImageSize(width: image.width, height: image.height), what: "the decoded image")
        if MagickGetNumberImages(wand) > 1 {
            guard let coalesced = MagickCoalesceImages(wand) else { throw error(wand, .decodeFailed, "cannot coalesce frames") }
            return MagickImage(wand: coalesced, format: format)
        }
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

    /// ImageMagick's version line.
    public static var version: String {
        var n = 0
        return String(cString: MagickGetVersion(&n))
    }

    /// A deep copy (all frames, pixels and settings), for running another chain on the same
    /// decoded image.
    public func clone() -> MagickImage {
        let copy = MagickImage(wand: CloneMagickWand(wand)!, format: outputFormat)
        copy.outputQuality = outputQuality
        copy.progressive = progressive
        copy.jxlEffort = jxlEffort
        copy.cancellation = cancellation
        copy.watermarks = watermarks
        return copy
    }

    /// The colour space of the current frame.
    var colorspace: ColorspaceType { MagickGetImageColorspace(wand) }

    /// Converts to another colour space (tests build CMYK inputs with it).
    func transform(to space: ColorspaceType) -> Bool { MagickTransformImageColorspace(wand, space) == MagickTrue }

    /// Appends `frame`'s images as new frames.
    package func append(_ frame: MagickImage) { MagickAddImage(wand, frame.wand) }

    /// Number of frames (1 for still images).
    public var frameCount: Int { Int(MagickGetNumberImages(wand)) }

    /// Rotates and flips per the EXIF orientation, then forgets the tag.
    public func autoOrient() throws(HalcyonError) {
        try forEachFrame("auto-orient") {
            let o = MagickGetImageOrientation(wand)
            guard o != TopLeftOrientation, o != UndefinedOrientation else { return MagickTrue }
            return MagickAutoOrientImage(wand)
        }
    }

    /// Converts to sRGB. An embedded ICC profile that is not sRGB (Display P3, Adobe RGB, a
    /// CMYK press profile, …) is applied through lcms2 onto Halcyon's sRGB profile; an image
    /// without one in another colour space (CMYK, grey, …) gets ImageMagick's formula. A profile
    /// lcms2 cannot use is dropped, as browsers do, rather than failing the image.
    /// Whether the image is in ImageMagick's (gamma-encoded) gray colorspace, with no ICC profile.
    var isGray: Bool { MagickGetImageColorspace(wand) == GRAYColorspace && embeddedProfile() == nil }

    public func toSRGB() throws(HalcyonError) {
        try forEachFrame("convert to sRGB") {
            if let profile = embeddedProfile(), !(ICCProfile.description(of: profile)?.contains("sRGB") ?? false) {
                let ok = ICCProfile.sRGB.withUnsafeBytes { MagickProfileImage(wand, "icc", $0.baseAddress, $0.count) }
                if ok == MagickTrue { return MagickTrue }
                MagickClearException(wand)
                var length = 0
                if let removed = MagickRemoveImageProfile(wand, "icc", &length) { MagickRelinquishMemory(removed) }
            }
            let space = MagickGetImageColorspace(wand)
            guard space != sRGBColorspace, space != RGBColorspace else { return MagickTrue }
            return MagickTransformImageColorspace(wand, sRGBColorspace)
        }
    }

    /// The current frame's ICC profile, if it has one.
    func embeddedProfile() -> Data? {
        var length = 0
        guard let bytes = MagickGetImageProfile(wand, "icc", &length) else { return nil }
        defer { MagickRelinquishMemory(bytes) }
        return length > 0 ? Data(bytes: bytes, count: length) : nil
    }

    /// Progressive JPEG / interlaced PNG output.
    public var progressive = false
    /// JPEG: the chroma sampling, `.full` or `.half`, whatever the quality or the source's (the
    /// others follow ImageMagick's rule); AVIF: `.full` for 4:4:4 (else 4:2:0). Nil: ImageMagick's
    /// rule for JPEG (the source JPEG's sampling, else 4:4:4 from quality 90, 4:2:0 below).
    public var chroma: ChromaSampling?

    /// Runs `body` on every frame (one for still images; animations are coalesced at decode).
    func forEachFrame(_ what: String, _ body: () -> MagickBooleanType) throws(HalcyonError) {
        MagickResetIterator(wand)
        while MagickNextImage(wand) == MagickTrue {
            try cancellation?.check()
            try check(body(), what)
        }
        MagickResetIterator(wand)
        MagickSetFirstIterator(wand)
    }

    /// Scales every frame to `width`×`height` (Lanczos-3, `Resampler`) and keeps `window` of
    /// the result (the whole of it when nil): a resize and a crop in one pass. Each frame is
    /// streamed from its pixels into a new frame of the window's size; nothing but a few rows is
    /// held besides the two frames.
    func resize(width: Int, height: Int, window: Resampler.Window? = nil) throws(HalcyonError) {
        let win = window ?? Resampler.Window(x: 0, y: 0, width: width, height: height)
        precondition(
            win.x >= 0 && win.y >= 0 && win.width >= 1 && win.height >= 1
                && win.x + win.width <= width && win.y + win.height <= height)
        try forEachFrame("resize to \(width)x\(height)") {
            let w = Int(MagickGetImageWidth(wand)), h = Int(MagickGetImageHeight(wand))
            if w == width, h == height {
                guard win.width != w || win.height != h else { return MagickTrue }
                return cropFrame(width: win.width, height: win.height, x: win.x, y: win.y)
            }
            guard let current = GetImageFromMagickWand(wand) else { return MagickFalse }
            let alpha = MagickGetImageAlphaChannel(wand) == MagickTrue
            let map = alpha ? "RGBA" : "RGB", channels = alpha ? 4 : 3
            let exception = AcquireExceptionInfo()
            defer { DestroyExceptionInfo(exception) }
            // A new frame of the window's size with the old one's settings (delay, disposal, …).
            guard let target = CloneImage(current, win.width, win.height, MagickTrue, exception) else { return MagickFalse }
            defer { DestroyImage(target) }
            // 16-bit samples are ImageMagick's own (Q16) depth: nothing is lost either way.
            let ok = Resampler.resample(
                width: w, height: h, channels: channels, targetWidth: width, targetHeight: height, window: win,
                read: { (first: Int, count: Int, columns: Range<Int>, buffer: UnsafeMutablePointer<UInt16>) -> Bool in
                    cancellation?.isCancelled != true
                        && MagickExportImagePixels(wand, columns.lowerBound, first, columns.count, count, map, ShortPixel, buffer) == MagickTrue
                },
                write: { (first: Int, count: Int, rows: UnsafePointer<UInt16>) -> Bool in
                    ImportImagePixels(target, 0, first, win.width, count, map, ShortPixel, rows) == MagickTrue
                })
            guard ok, let replacement = NewMagickWandFromImage(target) else { return MagickFalse }
            defer { DestroyMagickWand(replacement) }
            guard MagickSetImage(wand, replacement) == MagickTrue else { return MagickFalse }
            return MagickSetImagePage(wand, win.width, win.height, 0, 0)
        }
    }

    public func crop(width: Int, height: Int, x: Int, y: Int) throws(HalcyonError) {
        try forEachFrame("crop") { cropFrame(width: width, height: height, x: x, y: y) }
    }

    /// Crops the current frame and makes its page (canvas) the cropped size.
    private func cropFrame(width: Int, height: Int, x: Int, y: Int) -> MagickBooleanType {
        let ok = MagickCropImage(wand, width, height, x, y)
        MagickResetImagePage(wand, "0x0+0+0")
        return ok
    }

    /// Transparent areas composited onto white, as a JPEG output has them.
    func flattenOntoWhite() throws(HalcyonError) {
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

    /// A copy of the first frame alone, with this image's output settings.
    func firstFrame() throws(HalcyonError) -> MagickImage {
        MagickSetFirstIterator(wand)
        guard let frame = MagickGetImage(wand) else { throw Self.error(wand, .processingFailed, "copy the first frame") }
        let copy = MagickImage(wand: frame, format: outputFormat)
        copy.outputQuality = outputQuality
        copy.progressive = progressive
        copy.pngCompression = pngCompression
        copy.jxlEffort = jxlEffort
        copy.cancellation = cancellation
        return copy
    }

    /// Keeps only the first frame (for outputs that cannot animate).
    package func keepFirstFrame() {
        while MagickGetNumberImages(wand) > 1 {
            MagickSetLastIterator(wand)
            MagickRemoveImage(wand)
        }
        MagickResetIterator(wand)
    }

    /// A pixel wand of `color`, in ImageMagick's `rgba(…)` spelling.
    static func pixel(_ color: Color) -> OpaquePointer {
        pixel(named: "rgba(\(color.red),\(color.green),\(color.blue),\(Double(color.alpha) / 255))")
    }

    package static func pixel(named spec: String) -> OpaquePointer {
        let p = NewPixelWand()!
        PixelSetColor(p, spec)
        return p
    }

    /// Encodes in `outputFormat`, stripped of metadata. Transparent areas of an image going to
    /// JPEG are flattened onto white.
    public func encode() throws(HalcyonError) -> Data {
        if !outputFormat.animates { keepFirstFrame() }
        try forEachFrame("strip") { MagickStripImage(wand) }
        if outputFormat == .jpeg, hasAlpha { try flattenOntoWhite() }
        if outputFormat == .png, !progressive, let png = try encodeDirectPNG() { return png }
        if outputFormat == .avif { return try encodeAVIF() }
        if outputFormat == .jxl { return try encodeJXL() }
        // The wand-level format was set to the input coder for decoding; it would win over the
        // image's own format when writing, so both are set.
        try check(MagickSetFormat(wand, outputFormat.magickName), "set format")
        try check(MagickSetImageFormat(wand, outputFormat.magickName), "set format")
        if outputFormat.hasQuality {
            MagickSetImageCompressionQuality(wand, outputQuality)
        }
        if outputFormat == .jpeg {
            // Set or cleared at every encode: a wand encoded once with full chroma keeps no
            // sampling of it for the next (cleared, the writer follows ImageMagick's own rule).
            // One factor per component, each its horizontal and vertical sampling alike (the
            // wand lists them "2,1,1"): luma 2×2 and chroma 1×1 is 4:2:0.
            if chroma == .full || chroma == .half {
                var factors: [Double] = [chroma == .half ? 2 : 1, 1, 1]
                MagickSetSamplingFactors(wand, 3, &factors)
            } else {
                MagickSetSamplingFactors(wand, 0, nil)
            }
        }
        if outputFormat == .png {
            MagickSetOption(wand, "png:compression-level", String(pngCompression))
        }
        if progressive {
            MagickSetInterlaceScheme(wand, PlaneInterlace)
            MagickSetImageInterlaceScheme(wand, PlaneInterlace)
        }
        var length = 0
        // Animations are written whole; everything else is one image.
        let blob = outputFormat.animates && MagickGetNumberImages(wand) > 1 ? MagickGetImagesBlob(wand, &length) : MagickGetImageBlob(wand, &length)
        guard let blob else {
            throw Self.error(wand, .processingFailed, "encode \(outputFormat.rawValue)")
        }
        defer { MagickRelinquishMemory(blob) }
        return Data(bytes: blob, count: length)
    }

    private func check(_ ok: MagickBooleanType, _ what: String) throws(HalcyonError) {
        guard ok == MagickTrue else { throw Self.error(wand, .processingFailed, what) }
    }

    /// ImageMagick's own message for the wand's last exception. `resourceLimit` is the code
    /// for a resource limit reached (memory, map, disk: by default the process's shared pool).
    package static func error(
        _ wand: OpaquePointer, _ code: ErrorCode, _ what: String, resourceLimit: ErrorCode = .resourcesExhausted
    ) -> HalcyonError {
        var severity = UndefinedException
        var message = ""
        if let m = MagickGetException(wand, &severity) {
            message = String(cString: m)
            MagickRelinquishMemory(m)
        }
        MagickClearException(wand)
        let reason = reasonText(message)
        let text = reason.isEmpty ? what : "\(what): \(reason)"
        let detail = message.isEmpty ? nil : message
        // A per-image policy limit (width, height, area, frames: "… exceeds limit") refused this
        // image itself: too large, for good.
        if message.contains("exceeds limit") { return HalcyonError(.imageTooLarge, text, detail: detail) }
        // Anything else over a resource limit is the process's shared pool (memory, map, disk)
        // running dry: the pixel budget has already admitted this image, so the other jobs in
        // the worker hold the resources. Retry later; this job is not at fault.
        // A coder reading pixels reports the pool running dry under its own severity, so the
        // message counts too.
        let shortage = ["cache resources exhausted", "memory allocation failed", "unable to extend cache", "pixel cache allocation failed"]
        if severity == ResourceLimitError || severity == ResourceLimitFatalError || shortage.contains(where: message.contains) {
            return resourceLimit == .resourcesExhausted
                ? HalcyonError(
                    .resourcesExhausted, "\(text) (ImageMagick's memory, map and disk limits are shared by the worker's jobs; retried later)",
                    detail: detail)
                : HalcyonError(resourceLimit, text, detail: detail)
        }
        return HalcyonError(code, text, detail: detail)
    }

    /// ImageMagick's reason without what only its developers need: the quoted file name that
    /// follows it (empty for a blob) and the `@ error/gif.c/ReadGIFImage/1302` tail —
    /// `negative or zero image size `' @ error/gif.c/…` reads `negative or zero image size`.
    package static func reasonText(_ message: String) -> String {
        var text = Substring(message)
        if let at = text.range(of: " @ ", options: .backwards) { text = text[..<at.lowerBound] }
        if text.hasSuffix("'"), let open = text.range(of: " `", options: .backwards) { text = text[..<open.lowerBound] }
        return text.trimmingCharacters(in: .whitespaces)
    }
}
