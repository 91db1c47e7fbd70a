import Foundation
import HalcyonDomain
import HalcyonImage

/// Fuzz target `direct`: the pipeline's direct lane as `ImagePipeline.run` drives it, without
/// ImageMagick — the byte checks, the headers (`hc_jpeg_read_info`: libjpeg-turbo's, with the
/// C EXIF-orientation walk; the PNG chunk walk), the plan, the decode at the shrink-on-load
/// scale (`hc_jpeg_decode_rgb`, `hc_png_decode`), the Lanczos resize and the JPEG encoder
/// (`DirectLane.run`); then the direct PNG writer (`MagickImage.encodeDirectPNG`: the colour
/// survey and `hc_png_encode`) on the decoded pixels.
///
/// The pixel budget is smaller than a worker's (1 MP) so that each input stays fast. The chain
/// is picked by the input's last byte; the format is sniffed (bytes no sniffer knows are tried
/// as JPEG or PNG by their first byte).
///
/// Properties checked: a decoded image is as large as its header said; the lane's output is a
/// JPEG of the size it reports that reads back; a PNG the direct writer makes reads back, through
/// the lane's own PNG decoder, to exactly the pixels it was given.
public enum DirectFuzz {
    static let chains: [ProcessorChain] = [
        "resize(48x48, mode=fill) |> format(jpeg, quality=80)", "downsample(40x30) |> format(jpeg, progressive=true, quality=95)",
        "resize(37x23, mode=stretch) |> strip |> format(jpeg)", "auto_orient |> resize(64x64) |> format(jpeg, quality=50, max_bytes=1000)",
        "resize(16x16, mode=fill, gravity=south_east) |> format(jpeg, quality=90)",
    ].map { try! ProcessorChain.parse($0) }

    static let limits: ImageLimits = {
        var limits = ImageLimits()
        (limits.maxWidth, limits.maxHeight, limits.maxPixels) = (4096, 4096, 1_000_000)
        return limits
    }()

    public static func run(_ data: Data) {
        let format = ImageFormat.sniff(data) ?? ((data.first ?? 0) & 1 == 0 ? .jpeg : .png)
        let chain = chains[Int(data.last ?? 0) % chains.count]
        guard DirectLane.accepts(chain) else { preconditionFailure("the direct lane refuses '\(chain.identifier)'") }
        do {
            try limits.checkBytes(data, format: format)
        } catch {
            return
        }
        guard let source = DirectLane.source(data, format: format) else { return }
        let header = source.header
        do {
            try limits.check(header)
            try limits.plan(chain, from: header.decodedFrameSize, frames: 1)
        } catch {
            precondition([.imageTooLarge, .decodeFailed, .tooCostly].contains(error.code), "the checks failed with \(error.code)")
            return
        }
        let hint = ImagePipeline.shrinkHint([chain], header)
        guard let pixels = DirectLane.decode(data, source, hint: hint) else { return }
        precondition(pixels.channels == source.channels && pixels.width <= source.width && pixels.height <= source.height)
        precondition(hint != nil || (pixels.width == source.width && pixels.height == source.height), "a full decode of another size")
        do {
            let result = try DirectLane.run(chain, on: pixels, source: source, limits: limits, cancel: nil, decode: (0, 0))
            precondition(result.format == .jpeg && ImageFormat.sniff(result.data) == .jpeg, "the lane wrote no JPEG")
            let written = DirectLane.source(result.data, format: .jpeg)
            precondition(
                written?.width == result.width && written?.height == result.height, "the lane's JPEG is not \(result.width)x\(result.height)")
        } catch {
            precondition(error.code == .overMaxBytes || error.code == .imageTooLarge, "the lane failed with \(error.code): \(error.message)")
        }
        roundTripPNG(pixels)
    }

    /// The direct PNG writer on `pixels` (as ImageMagick would export them: 16-bit samples, each
    /// 8-bit value × 257), read back by the lane's PNG decoder.
    static func roundTripPNG(_ pixels: PixelBuffer) {
        let rowBytes = pixels.width * pixels.channels
        let png: Data?
        do {
            png = try MagickImage.encodeDirectPNG(width: pixels.width, height: pixels.height, alpha: pixels.channels == 4, compression: 1) {
                top, rows, samples in
                let from = pixels.bytes + top * rowBytes
                for i in 0..<(rows * rowBytes) { samples[i] = UInt16(from[i]) &* 257 }
                return true
            }
        } catch {
            preconditionFailure("the PNG writer failed on \(pixels.width)x\(pixels.height): \(error)")
        }
        guard let png else { return }  // ImageMagick's writer would choose (few colours, grey, on/off alpha)
        guard let source = DirectLane.source(png, format: .png), source.width == pixels.width, source.height == pixels.height,
            source.channels == pixels.channels, let back = DirectLane.decode(png, source, hint: nil)
        else { preconditionFailure("the PNG writer's \(pixels.width)x\(pixels.height) file does not read back") }
        precondition(memcmp(back.bytes, pixels.bytes, pixels.height * rowBytes) == 0, "the PNG writer changed pixels")
    }
}
