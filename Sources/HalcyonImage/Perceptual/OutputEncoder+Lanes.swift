import Foundation
import HalcyonChain
import HalcyonDomain

extension OutputEncoder {
    /// ImageMagick's lane: `image` after its chain's steps. The search scores an animation by
    /// its first frame, then encodes it whole and scores it over its frames (`AnimationScore`).
    static func magick(_ image: MagickImage, chain: ProcessorChain, scoreWanted: Bool) -> OutputEncoder {
        let step = chain.formatStep
        let isAnimation = image.frameCount > 1
        let still = Once { () throws(HalcyonError) in isAnimation ? try image.firstFrame() : image }
        let reference = Once { () throws(HalcyonError) in
            let pixels = try still.get()
            // A JPEG-only output of transparent pixels is scored against them flattened, as
            // the encoder writes them: the score measures the compression, not the flattening.
            if step?.formats == [.jpeg], pixels.hasAlpha { try pixels.flattenOntoWhite() }
            return try SSIMULACRA2Reference(pixels)
        }
        return OutputEncoder(
            step: step, format: image.outputFormat, quality: image.outputQuality, isAnimation: isAnimation, scoreWanted: scoreWanted,
            predictionKey: chain.identifier,
            encode: { encoding throws(HalcyonError) in
                let target = try still.get()
                target.set(encoding, step)
                return try target.encode()
            },
            encodeAll: isAnimation
                ? { encoding throws(HalcyonError) in
                    image.set(encoding, step)
                    return try image.encode()
                } : nil,
            scoreAll: isAnimation
                ? { data, format throws(HalcyonError) in
                    try AnimationScore(frames: image, first: reference.get()).score(encoded: data, format: format)
                } : nil,
            makeScorer: { () throws(HalcyonError) in try reference.get() })
    }

    /// The direct lane: 8-bit pixels after a resize, JPEG through libjpeg-turbo (half qualities
    /// too), WebP through libwebp, anything else through an ImageMagick image made from the same pixels (once).
    static func direct(
        _ pixels: PixelBuffer, chain: ProcessorChain, format: ImageFormat, quality: Int, progressive: Bool, compression: Int,
        sampling: (h: Int, v: Int)?, scoreWanted: Bool
    ) -> OutputEncoder {
        var magick: [ImageFormat: MagickImage] = [:]
        return OutputEncoder(
            step: chain.formatStep, format: format, quality: quality, scoreWanted: scoreWanted, predictionKey: chain.identifier,
            halfQualities: true,
            encode: { encoding throws(HalcyonError) in
                let (format, quality) = (encoding.format, encoding.quality)
                if format == .jpeg {
                    // ImageMagick's rule: the source JPEG's sampling, else 4:4:4 from quality 90, 4:2:0 below.
                    let chroma = encoding.chroma?.lumaFactors ?? sampling ?? (quality >= 90 ? (1, 1) : (2, 2))
                    return try pixels.encodeJPEG(quality: quality, half: encoding.half, progressive: progressive, sampling: chroma)
                }
                if format == .webp { return try pixels.encodeWebP(quality: quality) }
                let image: MagickImage
                if let made = magick[format] {
                    image = made
                } else {
                    image = try pixels.magickImage(format: format)
                    magick[format] = image
                }
                image.outputQuality = quality
                image.progressive = progressive && format == .png
                image.pngCompression = compression
                image.jxlEffort = chain.formatStep?.effort ?? FormatStep.defaultEffort
                return try image.encode()
            },
            makeScorer: { () throws(HalcyonError) in
                // As ImageMagick's lane: a JPEG-only output of transparent pixels is scored flattened.
                try SSIMULACRA2Reference(chain.formatStep?.formats == [.jpeg] && pixels.channels == 4 ? pixels.flattenedOnWhite() : pixels)
            })
    }
}

extension MagickImage {
    /// The output settings for one encode of a `format` step's search.
    fileprivate func set(_ encoding: Encoding, _ step: FormatStep?) {
        outputFormat = encoding.format
        outputQuality = encoding.quality
        chroma = encoding.chroma
        if let step { progressive = step.progressive && (encoding.format == .jpeg || encoding.format == .png) }
    }
}

/// A value made on first use (closures of one encoder share it).
final class Once<Value> {
    private var value: Value?
    private let make: () throws(HalcyonError) -> Value

    init(_ make: @escaping () throws(HalcyonError) -> Value) { self.make = make }

    func get() throws(HalcyonError) -> Value {
        if let value { return value }
        let made = try make()
        value = made
        return made
    }
}
