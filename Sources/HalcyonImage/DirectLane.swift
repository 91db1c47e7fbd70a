internal import CImageCodecs
internal import CMagickWand
import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonRuntime

/// The pipeline's fast lane: JPEG and PNG sources decoded straight into 8-bit pixels with
/// libjpeg-turbo and libpng (the libraries ImageMagick decodes them with), resized by
/// `Resampler`, and JPEG outputs encoded with libjpeg-turbo — no ImageMagick image in between.
/// Other outputs are handed to ImageMagick (`MagickImage`) to encode.
///
/// Through ImageMagick a JPEG is decoded into its 16-bit pixel cache (a fresh allocation, a
/// conversion of every sample), exported to 16-bit rows for the resampler, imported back and
/// exported again to 8-bit for the encoder: on W1 that costs about as much CPU as the decode
/// itself (README, Benchmark). Only what this lane does exactly as the ImageMagick lane would
/// takes it: chains of `resize`, `downsample` and `format` (plus the no-op `strip` and
/// `auto_orient`), sources without an ICC profile or an EXIF rotation, 8-bit PNGs without a
/// gamma other than sRGB's, JPEGs in grey or YCbCr. Everything else — and any source this
/// lane fails to decode — goes through ImageMagick as before, so errors keep their codes.
/// `HALCYON_DIRECT_CODECS=0` turns the lane off (for A/B measurements).
package enum DirectLane {
    package static let enabled = ProcessInfo.processInfo.environment["HALCYON_DIRECT_CODECS"] != "0"

    /// A source this lane can decode, from its headers.
    package struct Source: Sendable {
        package var format: ImageFormat
        package var width: Int
        package var height: Int
        /// 3 (RGB) or 4 (RGBA: a PNG with an alpha channel or a transparent colour).
        package var channels: Int
        /// A colour JPEG's luma sampling relative to chroma (2×2 is 4:2:0): ImageMagick writes a
        /// JPEG made from a JPEG with the source's sampling, so this lane does too.
        var sampling: (h: Int, v: Int)? = nil

        package var header: MagickImage.Header {
            MagickImage.Header(width: width, height: height, frames: 1, swapsAxes: false)
        }

        /// The smallest JPEG scale M/8 whose decode still covers `hint` (8 = full size).
        func scale(for hint: (width: Int, height: Int)?) -> Int {
            guard format == .jpeg, let hint else { return 8 }
            for num in 1...8 {
                let s = scaledSize(num)
                if s.width >= hint.width, s.height >= hint.height { return num }
            }
            return 8
        }

        func scaledSize(_ num: Int) -> ImageSize {
            var w: Int32 = 0, h: Int32 = 0
            hc_jpeg_scaled_size(Int32(width), Int32(height), Int32(num), &w, &h)
            return ImageSize(width: Int(w), height: Int(h))
        }
    }

    /// Whether every step of `chain` is one this lane runs.
    package static func accepts(_ chain: ProcessorChain) -> Bool {
        chain.processors.allSatisfy {
            ($0 as? ResizeStep).map { !$0.gravity.readsPixels } ?? false || $0 is DownsampleStep || $0 is FormatStep
                || $0 is StripStep
                || $0 is AutoOrientStep
        } && chain.outputFormat != .gif && chain.recompression == nil
    }

    /// The source, when its headers say this lane decodes it exactly as ImageMagick would.
    package static func source(_ data: Data, format: ImageFormat) -> Source? {
        switch format {
        case .jpeg:
            var info = hc_jpeg_info()
            let ok = data.withUnsafeBytes { b in
                withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(HC_ERROR_LENGTH)) {
                    hc_jpeg_read_info(b.baseAddress?.assumingMemoryBound(to: UInt8.self), b.count, &info, $0.baseAddress) == 0
                }
            }
            // Grey, YCbCr or RGB; no rotation to apply; no profile to convert from.
            guard ok, info.rgb_decodable == 1, info.has_icc == 0, info.width > 0, info.height > 0, !needsRotation(data) else { return nil }
            return Source(
                format: .jpeg, width: Int(info.width), height: Int(info.height), channels: 3,
                sampling: info.luma_h > 0 && info.luma_v > 0 ? (Int(info.luma_h), Int(info.luma_v)) : nil)
        case .png:
            return PNGChunks.source(data)
        default:
            return nil
        }
    }

    /// Whether a JPEG's EXIF (read by the one EXIF reader, `ExifReader`) may ask for a rotation:
    /// an orientation other than 1, or an EXIF block too malformed to tell — ImageMagick's own
    /// reader might still find one there.
    static func needsRotation(_ data: Data) -> Bool {
        guard let block = ExifLocator.block(in: data, format: .jpeg) else { return false }
        guard let reader = ExifReader(block) else { return true }
        return (reader.read().orientation ?? 1) != 1
    }

    /// Decodes `source` at the smallest scale that covers `hint`; nil when the decoder fails
    /// (the ImageMagick lane then decodes it, and reports what is wrong with it).
    package static func decode(_ data: Data, _ source: Source, hint: (width: Int, height: Int)?) -> PixelBuffer? {
        let num = source.scale(for: hint)
        let size = source.format == .jpeg ? source.scaledSize(num) : ImageSize(width: source.width, height: source.height)
        let pixels = PixelBuffer(width: size.width, height: size.height, channels: source.channels)
        let ok = data.withUnsafeBytes { b in
            let bytes = b.baseAddress?.assumingMemoryBound(to: UInt8.self)
            return withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(HC_ERROR_LENGTH)) { error in
                source.format == .jpeg
                    ? hc_jpeg_decode_rgb(bytes, b.count, Int32(num), pixels.bytes, pixels.stride, error.baseAddress) == 0
                    : hc_png_decode(bytes, b.count, Int32(source.channels), pixels.bytes, Int32(size.width), Int32(size.height), error.baseAddress)
                        == 0
            }
        }
        return ok ? pixels : nil
    }

    /// Runs one accepted chain on the shared decoded pixels.
    package static func run(
        _ chain: ProcessorChain, on base: PixelBuffer, source: Source, limits: ImageLimits,
        cancel: CancellationFlag?, decode: (wall: Double, cpu: Double), placeholders request: PlaceholderRequest? = nil,
        scoreWanted: Bool = false, outputHash: Bool = false
    ) throws(HalcyonError) -> ProcessedImage {
        var clock = StageClock()
        // A JPEG-only output of transparent pixels is flattened onto white before the resize,
        // not after: the same pixels (flattening and the premultiplied filter are both linear),
        // and the resize then runs on opaque RGB, in fixed point. Not with placeholders, which
        // describe the resized pixels' alpha.
        var image = base.channels == 4 && request == nil && chain.formatStep?.formats == [.jpeg] ? base.flattenedOnWhite() : base
        var output = (format: source.format, quality: 85, progressive: false, compression: FormatStep.defaultCompression)
        for (n, processor) in chain.processors.enumerated() {
            try cancel?.check()
            try limits.check(step: n, processor, from: image.size, frames: 1)
            switch processor {
            case let resize as ResizeStep:
                let (scaled, window) = resize.geometry(from: image.size)
                image = try image.resized(to: scaled, window: window)
            case let downsample as DownsampleStep:
                image = try image.resized(to: downsample.outputSize(from: image.size), window: nil)
            case let format as FormatStep:
                output = (
                    format.format?.imageFormat ?? output.format, format.quality, format.progressive && format.format?.canBeProgressive != false,
                    format.compression
                )
            default:
                break  // strip and auto_orient: nothing to do on these pixels
            }
        }
        let placeholders = try request.map { request throws(HalcyonError) in try Thumbnail(image).placeholders(request) }
        let hash = outputHash ? try PerceptualHash.compute(image)?.first : nil
        try cancel?.check()
        let process = clock.lap()
        let encoder = OutputEncoder.direct(
            image, chain: chain, format: output.format, quality: output.quality, progressive: output.progressive, compression: output.compression,
            sampling: source.sampling, scoreWanted: scoreWanted && limits.canScore(image.size))
        var result = ProcessedImage(
            try encoder.run(), width: image.width, height: image.height, decode: decode, process: process, encode: clock.lap())
        result.placeholders = placeholders
        result.outputHash = hash
        return result
    }
}

/// 8-bit RGB or RGBA pixels, rows packed. Immutable once made: the chains of one source share it.
package final class PixelBuffer: @unchecked Sendable {
    package let width: Int
    package let height: Int
    package let channels: Int
    /// `height` rows of `stride` bytes, `channels` a pixel.
    package let bytes: UnsafeMutablePointer<UInt8>

    init(width: Int, height: Int, channels: Int) {
        self.width = width
        self.height = height
        self.channels = channels
        bytes = .allocate(capacity: max(1, width * height * channels))
    }

    deinit { bytes.deallocate() }

    var stride: Int { width * channels }
    var size: ImageSize { ImageSize(width: width, height: height) }

    /// Scaled to `scaled` (Lanczos-3), keeping `window` of it (all of it when nil).
    func resized(to scaled: ImageSize, window: Resampler.Window?) throws(HalcyonError) -> PixelBuffer {
        let win = window ?? Resampler.Window(x: 0, y: 0, width: scaled.width, height: scaled.height)
        if scaled == size, win.width == width, win.height == height { return self }
        let target = PixelBuffer(width: win.width, height: win.height, channels: channels)
        if scaled == size {
            for y in 0..<win.height {
                (target.bytes + y * target.stride).update(from: bytes + (win.y + y) * stride + win.x * channels, count: target.stride)
            }
            return target
        }
        let ok = Resampler.resample8(
            bytes, stride: stride, width: width, height: height, channels: channels, targetWidth: scaled.width, targetHeight: scaled.height,
            window: win, into: target.bytes, targetStride: target.stride)
        guard ok else { throw HalcyonError(.processingFailed, "resize to \(scaled)") }
        return target
    }

    /// A JPEG of these pixels at `quality` (and a half, with `half`: libjpeg's scale between
    /// it and the next); transparent areas are flattened onto white, as ImageMagick's lane does
    /// for a JPEG output.
    package func encodeJPEG(quality: Int, half: Bool = false, progressive: Bool, sampling: (h: Int, v: Int)) throws(HalcyonError) -> Data {
        let rgb = channels == 3 ? self : flattenedOnWhite()
        return try CodecOutput.take("encode jpeg", library: "libjpeg") { out, length, error in
            hc_jpeg_encode_rgb(
                rgb.bytes, Int32(width), Int32(height), rgb.stride, Int32(2 * quality + (half ? 1 : 0)), progressive ? 1 : 0, Int32(sampling.h),
                Int32(sampling.v),
                out, length, error)
        }
    }

    /// A WebP of these pixels (alpha kept), as ImageMagick's writer makes it: libwebp directly
    /// (`hc_webp_encode`), with no 16-bit ImageMagick image in between.
    func encodeWebP(quality: Int) throws(HalcyonError) -> Data {
        // ImageMagick's writer refuses these sizes as a limit exceeded (`image.too_large`): so here.
        guard width <= Self.webPMaxSide, height <= Self.webPMaxSide else {
            throw HalcyonError(.imageTooLarge, "encode webp: \(width)x\(height) is beyond WebP's \(Self.webPMaxSide) pixels a side")
        }
        return try CodecOutput.take("encode webp", library: "libwebp") { out, length, error in
            hc_webp_encode(bytes, Int32(width), Int32(height), stride, Int32(channels), Int32(quality), out, length, error)
        }
    }

    /// The widest and tallest WebP (libwebp's `WEBP_MAX_DIMENSION`).
    static let webPMaxSide = 16383

    /// RGB from RGBA: each pixel composited over white (`hc_flatten_rgba_on_white`).
    func flattenedOnWhite() -> PixelBuffer {
        let rgb = PixelBuffer(width: width, height: height, channels: 3)
        hc_flatten_rgba_on_white(bytes, rgb.bytes, width * height)
        return rgb
    }

    /// These pixels as an ImageMagick image (8-bit), for the encoders this lane lacks.
    func magickImage(format: ImageFormat) throws(HalcyonError) -> MagickImage {
        _ = MagickImage.genesisToken
        let image = MagickImage(wand: NewMagickWand()!, format: format)
        let ok = MagickConstituteImage(image.wand, width, height, channels == 4 ? "RGBA" : "RGB", CharPixel, bytes)
        guard ok == MagickTrue else { throw MagickImage.error(image.wand, .processingFailed, "import pixels") }
        MagickSetImageDepth(image.wand, 8)
        return image
    }
}

/// The PNG chunks that decide whether libpng's simplified reader gives ImageMagick's pixels.
enum PNGChunks {
    static func source(_ data: Data) -> DirectLane.Source? {
        data.withUnsafeBytes { (b: UnsafeRawBufferPointer) -> DirectLane.Source? in
            func be32(_ i: Int) -> Int { Int(b[i]) << 24 | Int(b[i + 1]) << 16 | Int(b[i + 2]) << 8 | Int(b[i + 3]) }
            func type(_ i: Int) -> String { String(decoding: b[(i + 4)..<(i + 8)], as: UTF8.self) }
            guard b.count >= 33, type(8) == "IHDR" else { return nil }
            let width = be32(16), height = be32(20), depth = Int(b[24]), colorType = Int(b[25])
            guard width > 0, height > 0, depth <= 8, [0, 2, 3, 4, 6].contains(colorType) else { return nil }
            var alpha = colorType == 4 || colorType == 6
            var i = 8
            while i + 12 <= b.count {
                let length = be32(i), name = type(i)
                switch name {
                case "IDAT", "IEND":
                    return DirectLane.Source(format: .png, width: width, height: height, channels: alpha ? 4 : 3)
                case "iCCP":
                    return nil  // a profile to convert from: ImageMagick's lane does that
                case "gAMA":
                    // libpng's reader corrects any gamma but sRGB's (1/2.2, 45455); ImageMagick doesn't.
                    guard length == 4, i + 12 <= b.count, abs(be32(i + 8) - 45455) <= 450 else { return nil }
                case "tRNS":
                    alpha = true
                default:
                    break
                }
                guard length >= 0, length < b.count else { return nil }
                i += 12 + length
            }
            return nil
        }
    }
}
