import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonImage

/// Fuzz target `header`: what Halcyon reads from an image's bytes before any decoder runs — the
/// format sniffers, the declared sizes (PNG's IHDR, GIF's screen and every frame, JPEG's first
/// SOF and its precision, whether a JPEG is whole), the byte checks (`ImageLimits.checkBytes`),
/// the PNG chunk walk of the direct lane — and then the header the pipeline works from, its
/// limits (`ImageLimits.check`) and every step's planned size for a few chains
/// (`ImageLimits.plan`), with the shrink-on-load hint.
///
/// ImageMagick is not called: its ping (the header of formats Halcyon does not read itself, and
/// of any header these readers leave undecided) is slow to fuzz and is not Halcyon's parser.
/// The format is sniffed as the worker does; bytes no sniffer knows are read as the format their
/// first byte picks, so each reader also meets inputs meant for another.
///
/// Properties checked: every refusal is `image.too_large`, `image.decode_failed` or
/// `image.unsupported_format` (a plan's, `image.too_large` or `image.too_costly`); a GIF walk
/// stops one frame past the limit.
public enum HeaderFuzz {
    /// Chains planned from each header: shrinking, growing, rotating, keeping frames.
    static let chains: [ProcessorChain] = [
        "", "resize(320x320, mode=fill) |> format(webp, quality=80)", "resize(16384x16384, mode=stretch)", "downsample(64x64)",
        "auto_orient |> resize(100x50, mode=fit) |> format(jpeg)", "crop(100x100, gravity=fp(0.2,0.8))", "pad(16384x16384) |> rotate(30)",
        "rotate(90) |> round_corner(10%) |> format(gif)", "trim |> border(20) |> format(png)",
    ].map { try! ProcessorChain.parse($0) }

    static let refusals: Set<ErrorCode> = [.imageTooLarge, .decodeFailed, .unsupportedFormat]
    /// A plan refuses an output over the pixel budget, or a chain estimated past the work limit.
    static let planRefusals: Set<ErrorCode> = [.imageTooLarge, .tooCostly]

    public static func run(_ data: Data) {
        let decoded = ImageFormat.allCases.filter(\.isDecoded)
        let format = ImageFormat.sniff(data) ?? decoded[Int(data.first ?? 0) % decoded.count]
        _ = ImageFormat.unsupportedName(data, last: data.suffix(18))
        let declared = DeclaredSize.of(data, format: format)
        _ = DeclaredSize.jpegPrecision(data)
        _ = DeclaredSize.jpegChroma(data)
        if let stripped = JPEGMetadata.stripped(data, orientation: Int(data.last ?? 0) % 9) {
            precondition(stripped.starts(with: [0xFF, 0xD8]) && stripped.suffix(2) == Data([0xFF, 0xD9]), "a stripped JPEG lost its SOI or EOI")
            precondition(stripped.count <= data.count + 36, "stripping grew the JPEG by \(stripped.count - data.count) bytes")
        }
        _ = DeclaredSize.jpegIsWhole(data)
        let limits = ImageLimits()
        let gif = DeclaredSize.gifFrames(data, maxFrames: limits.maxFrames)
        if let gif { precondition(gif.frames.count <= limits.maxFrames + 1, "the GIF walk read \(gif.frames.count) frames") }
        do {
            try limits.checkBytes(data, format: format)
        } catch {
            precondition(refusals.contains(error.code), "checkBytes failed with \(error.code)")
            return
        }
        // The header the pipeline would work from; the orientation as the EXIF reader sees it.
        let orientation = SourceFacts.read(
            data, format: format, header: MagickImage.Header(width: 1, height: 1, frames: 1, swapsAxes: false), hasAlpha: false, profile: nil
        ).orientation
        let swapsAxes = (5...8).contains(orientation)
        let header: MagickImage.Header
        if format == .png, let direct = DirectLane.source(data, format: .png) {
            precondition(direct.width == declared?.width && direct.height == declared?.height, "two PNG readers disagree")
            header = MagickImage.Header(width: direct.width, height: direct.height, frames: 1, swapsAxes: false)
        } else if format == .gif, let gif, let first = gif.frames.first {
            header = MagickImage.Header(
                width: first.width, height: first.height, frames: gif.frames.count, swapsAxes: false, frameSizes: gif.frames, canvas: gif.canvas)
        } else if let declared {
            header = MagickImage.Header(width: declared.width, height: declared.height, frames: 1, swapsAxes: swapsAxes)
        } else {
            return  // ImageMagick's ping would decide
        }
        do {
            try limits.check(header)
        } catch {
            precondition(refusals.contains(error.code), "the header check failed with \(error.code)")
            return
        }
        let size = header.decodedFrameSize
        for chain in chains {
            for frames in Set([1, header.frames]) {
                do {
                    try limits.plan(chain, from: size, frames: frames)
                } catch {
                    precondition(planRefusals.contains(error.code), "the plan of '\(chain.identifier)' failed with \(error.code)")
                }
            }
            _ = ImagePipeline.shrinkHint([chain], header)
        }
        _ = ImagePipeline.shrinkHint(chains, header)
    }
}
