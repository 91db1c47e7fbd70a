import Foundation
import HalcyonDomain
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// `quality=auto`, `format(auto)` and scores on real encodes: each result is checked by scoring
/// its bytes again, against the chain's pixels made by the same chain ending in a lossless PNG.
@Suite(.cpuHeavy) struct PerceptualOutputTests {
    static let photo: Data = try! SampleImages.photo(width: 960, height: 640, seed: 21)

    /// The chain's own pixels (lossless), to score a result against.
    static func reference(_ source: Data, format: ImageFormat = .jpeg, _ steps: String) throws -> SSIMULACRA2Reference {
        let png = try ImagePipeline.run(source, format: format, chain: ProcessorChain.parse(steps + " |> format(png)")).data
        return try SSIMULACRA2Reference(MagickImage.decode(png, format: .png))
    }

    static func run(_ source: Data, format: ImageFormat = .jpeg, _ chain: String, direct: Bool = true, score: Bool = false) throws -> ProcessedImage {
        try ImagePipeline.run(source, format: format, chains: [ProcessorChain.parse(chain)], directLane: direct, scores: [score])[0].get()
    }

    /// A baseline or progressive JPEG's sampling byte per component (0x11 is full resolution).
    static func componentSampling(_ jpeg: Data) -> [UInt8] {
        let b = [UInt8](jpeg)
        guard let sof = (0..<(b.count - 10)).first(where: { b[$0] == 0xFF && (b[$0 + 1] == 0xC0 || b[$0 + 1] == 0xC2) }) else { return [] }
        return (0..<Int(b[sof + 9])).map { b[sof + 11 + 3 * $0] }
    }

    /// The lowest quality whose score reaches the target, in at most six encodes, in both lanes;
    /// the recorded score is the stored bytes' own.
    @Test(arguments: [true, false])
    func autoQualityReachesTheTarget(direct: Bool) throws {
        let reference = try Self.reference(Self.photo, "resize(480x480)")
        var last: (quality: Int, bytes: Int)?
        for target in [60.0, 75.0, 88.0] {
            let out = try Self.run(Self.photo, "resize(480x480) |> format(jpeg, quality=auto, min_score=\(Int(target)))", direct: direct)
            let quality = try #require(out.quality), score = try #require(out.score)
            #expect(out.format == .jpeg && out.encodes <= 6, "\(out.encodes) encodes")
            #expect(Self.componentSampling(out.data) == [0x11, 0x11, 0x11], "the search encodes 4:4:4 whatever the quality")
            #expect(score >= target && score < target + 6, "target \(target): \(score) at q\(quality)")
            #expect(abs(try reference.score(encoded: out.data, format: .jpeg) - score) < 0.01)
            // One quality lower misses the target (or the search stopped within a point of it).
            if quality > 10, score - target > 1 {
                let lower = try Self.run(Self.photo, "resize(480x480) |> format(jpeg, quality=\(quality - 1))", direct: direct)
                #expect(try reference.score(encoded: lower.data, format: .jpeg) < target, "q\(quality - 1) also reaches \(target)")
            }
            if let last { #expect(quality >= last.quality && out.data.count >= last.bytes, "a higher target costs more") }
            last = (quality, out.data.count)
        }
    }

    /// `format(auto)` keeps the smallest format that reaches the score; never larger than the
    /// jpeg search's own answer.
    @Test func autoFormatIsTheSmallestThatReachesTheScore() throws {
        let jpeg = try Self.run(Self.photo, "resize(480x480) |> format(jpeg, quality=auto, min_score=75)")
        let webp = try Self.run(Self.photo, "resize(480x480) |> format(webp, quality=auto, min_score=75)")
        let avif = try Self.run(Self.photo, "resize(480x480) |> format(avif, quality=auto, min_score=75)")
        let two = try Self.run(Self.photo, "resize(480x480) |> format(auto, min_score=75, formats=jpeg|webp)")
        #expect(two.format == (webp.data.count < jpeg.data.count ? .webp : .jpeg))
        #expect(two.data.count <= min(jpeg.data.count, webp.data.count))
        #expect(try #require(two.score) >= 75)
        #expect(two.encodes <= 12)
        // By default AVIF too: the smallest of the three.
        let auto = try Self.run(Self.photo, "resize(480x480) |> format(auto, min_score=75)")
        let sizes: [(ImageFormat, Int)] = [(.jpeg, jpeg.data.count), (.webp, webp.data.count), (.avif, avif.data.count)]
        #expect(auto.format == sizes.min { $0.1 < $1.1 }?.0)
        #expect(auto.data.count <= sizes.map(\.1).min()!)
        #expect(try #require(auto.score) >= 75 && auto.encodes <= 18)
    }

    /// Transparency rules JPEG out; an animation stays one (WebP).
    @Test func transparencyAndAnimationChooseFormatsThatKeepThem() throws {
        let logo = try SampleImages.photo(width: 200, height: 120, seed: 3, format: .png, alpha: true)
        let out = try Self.run(logo, format: .png, "format(auto, min_score=80)")
        #expect(out.format == .webp || out.format == .avif)
        #expect(try MagickImage.decode(out.data, format: out.format).hasAlpha)
        let gif = try SampleImages.animatedGIF(frames: 4, width: 60, height: 40)
        let animated = try Self.run(gif, format: .gif, "format(auto, min_score=70)")
        #expect(animated.format == .webp)
        #expect(try MagickImage.decode(animated.data, format: .webp).frameCount == 4)
        let still = try Self.run(gif, format: .gif, "format(auto, min_score=70, formats=jpeg)")
        #expect(still.format == .gif)
        // JPEG alone: flattened onto white and scored flattened, in both lanes.
        for direct in [true, false] {
            let flat = try Self.run(logo, format: .png, "format(jpeg, quality=auto, min_score=80)", direct: direct)
            #expect(flat.format == .jpeg && (flat.score ?? 0) >= 80, "direct \(direct): \(flat.score ?? -1)")
        }
    }

    /// With `max_bytes`, the smallest result that reaches the score if it fits, else the
    /// highest quality that fits, with its (lower) score.
    @Test func maxBytesWinsOverTheScore() throws {
        let free = try Self.run(Self.photo, "resize(480x480) |> format(jpeg, quality=auto, min_score=90)")
        let limit = free.data.count * 2 / 3
        let capped = try Self.run(Self.photo, "resize(480x480) |> format(jpeg, quality=auto, min_score=90, max_bytes=\(limit))")
        #expect(capped.data.count <= limit)
        #expect(try #require(capped.score) < 90 && (capped.quality ?? 100) < (free.quality ?? 0))
        let roomy = try Self.run(Self.photo, "resize(480x480) |> format(jpeg, quality=auto, min_score=90, max_bytes=\(free.data.count))")
        #expect(roomy.data == free.data)
    }

    /// A fixed quality is scored only when asked; the score is the bytes' own.
    @Test(arguments: [true, false])
    func fixedQualityScoresWhenAsked(direct: Bool) throws {
        let chain = "resize(480x480) |> format(jpeg, quality=82)"
        let plain = try Self.run(Self.photo, chain, direct: direct)
        #expect(plain.score == nil && plain.quality == 82 && plain.encodes == 1)
        let scored = try Self.run(Self.photo, chain, direct: direct, score: true)
        #expect(scored.data == plain.data)
        let expected = try Self.reference(Self.photo, "resize(480x480)").score(encoded: scored.data, format: .jpeg)
        #expect(abs(try #require(scored.score) - expected) < 0.01)
        let png = try Self.run(Self.photo, "resize(480x480) |> format(png)", direct: direct, score: true)
        #expect(png.quality == nil && (png.score ?? 0) > 99)
    }

    /// A score holds its reference besides the image: counted in the pixel budget, refused
    /// before the decode for `quality=auto`, skipped (not failed) for the `score` option.
    @Test func aScoreOverThePixelBudgetIsRefusedBeforeDecoding() throws {
        var limits = ImageLimits()
        limits.maxPixels = 1_000_000
        let auto = try ProcessorChain.parse("resize(640x360, mode=fill) |> format(jpeg, quality=auto)")
        let refused = try ImagePipeline.run(Self.photo, format: .jpeg, chains: [auto], limits: limits)
        guard case .failure(let error) = try #require(refused.first) else {
            Issue.record("a score over the budget was not refused")
            return
        }
        #expect(error.code == .imageTooLarge && error.message.contains("to score"), "\(error)")
        let fixed = try ProcessorChain.parse("resize(640x360, mode=fill) |> format(jpeg, quality=80)")
        let out = try ImagePipeline.run(Self.photo, format: .jpeg, chains: [fixed], limits: limits, scores: [true])[0].get()
        #expect(out.score == nil && out.quality == 80)
        let small = try ProcessorChain.parse("resize(320x180, mode=fill) |> format(jpeg, quality=80)")
        #expect(try ImagePipeline.run(Self.photo, format: .jpeg, chains: [small], limits: limits, scores: [true])[0].get().score != nil)
    }

    /// An output under 8×8 cannot be scored: encoded at the predicted quality, no score, no error.
    @Test func anOutputTooSmallToScoreIsEncodedUnscored() throws {
        for chain in ["resize(6x6, mode=fill) |> format(jpeg, quality=auto)", "resize(6x6, mode=fill) |> format(auto)"] {
            let out = try Self.run(Self.photo, chain)
            #expect(out.score == nil && out.quality != nil && (out.width, out.height) == (6, 6), "\(chain)")
        }
        let fixed = try Self.run(Self.photo, "resize(6x6, mode=fill) |> format(jpeg, quality=80)", score: true)
        #expect(fixed.score == nil && fixed.quality == 80)
    }

    /// Full chroma holds for the encode that asks for it only: the same image encoded again
    /// without it follows ImageMagick's rule (4:2:0 below quality 90 for a PNG source).
    @Test func fullChromaIsPerEncode() throws {
        let png = try SampleImages.photo(width: 64, height: 48, seed: 5, format: .png)
        let image = try MagickImage.decode(png, format: .png)
        image.outputFormat = .jpeg
        image.outputQuality = 80
        image.fullChroma = true
        #expect(Self.componentSampling(try image.encode()) == [0x11, 0x11, 0x11])
        image.fullChroma = false
        #expect(Self.componentSampling(try image.encode()) == [0x22, 0x11, 0x11])
    }

    /// The formats `format(auto)` may choose for given pixels.
    @Test func candidatesFollowThePixels() throws {
        let step = try #require(try ProcessorChain.parse("format(auto, formats=jpeg|webp|avif)").formatStep)
        let all: [ImageFormat] = [.jpeg, .webp, .avif].filter(\.canEncode)
        #expect(OutputEncoder.candidates(step, isAnimation: false, hasTransparency: false) == all)
        #expect(!OutputEncoder.candidates(step, isAnimation: false, hasTransparency: true).contains(.jpeg))
        #expect(OutputEncoder.candidates(step, isAnimation: true, hasTransparency: false) == [.webp])
        let jpegOnly = try #require(try ProcessorChain.parse("format(auto, formats=jpeg)").formatStep)
        #expect(OutputEncoder.candidates(jpegOnly, isAnimation: false, hasTransparency: true) == [.jpeg])
        #expect(OutputEncoder.candidates(jpegOnly, isAnimation: true, hasTransparency: false) == [.gif])
        #expect(ImageFormat.encodable.isSuperset(of: [.jpeg, .png, .webp, .gif]))
    }
}
