internal import CMagickWand
import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonQualityReference
import HalcyonRuntime
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// The pixel budget: no image a job holds — the decoded source, its frames, any step's output —
/// may exceed it, and each is checked before it is allocated.
@Suite(.cpuHeavy) struct PixelBudgetTests {
    static let onePixel = Data(base64Encoded: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")!

    func run(_ data: Data, _ format: ImageFormat, _ chain: String, limits: ImageLimits = ImageLimits()) throws -> ProcessedImage {
        try ImagePipeline.run(data, format: format, chain: try ProcessorChain.parse(chain), limits: limits)
    }

    func expectTooLarge(_ body: () throws -> Void, mentioning text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(sourceLocation: sourceLocation) { try body() } throws: { error in
            (error as? HalcyonError)?.code == .imageTooLarge && "\(error)".contains(text)
        }
    }

    /// A 1×1 PNG stretched to 16000×16000 used to allocate 4 GB and run for 80 s before failing
    /// in the PNG encoder; it must fail at once, naming the step and the size.
    @Test func aStepWhoseOutputIsOverTheBudgetFailsBeforeAnythingIsAllocated() throws {
        let counter = ImagePipeline.DecodeCounter()
        ImagePipeline.$observer.withValue(counter) {
            expectTooLarge(
                { _ = try run(Self.onePixel, .png, "resize(16000x16000, mode=stretch) |> format(png)") },
                mentioning: "step 1, resize(16000x16000,mode=stretch), would be 16000x16000 (256.0 MP), over the 100 MP budget")
        }
        #expect(counter.count == 0, "the chain was refused from the header: nothing was decoded")
        // Later steps are walked too: a crop brings a big resize back under the budget only
        // after the resize, so the resize itself is what fails.
        expectTooLarge({ _ = try run(Self.onePixel, .png, "resize(12000x12000, mode=stretch) |> crop(10x10)") }, mentioning: "step 1")
        expectTooLarge({ _ = try run(Self.onePixel, .png, "resize(9000x9000, mode=stretch) |> rotate(45)") }, mentioning: "step 2, rotate(45)")
        // Within the budget all is well.
        let ok = try run(Self.onePixel, .png, "resize(300x200, mode=stretch) |> rotate(90) |> format(png)")
        #expect((ok.width, ok.height) == (200, 300))
    }

    @Test func theBudgetIsConfigurable() throws {
        var limits = ImageLimits()
        limits.maxPixels = 10_000
        expectTooLarge(
            { _ = try run(Self.onePixel, .png, "resize(101x100, mode=stretch)", limits: limits) }, mentioning: "over the 10000 pixels budget")
        #expect(try run(Self.onePixel, .png, "resize(100x100, mode=stretch)", limits: limits).width == 100)
        // The source is held to it as well.
        let photo = try SampleImages.photo(width: 200, height: 100, seed: 1, format: .png)
        expectTooLarge({ _ = try run(photo, .png, "resize(10x10)", limits: limits) }, mentioning: "200x100")
    }

    /// Every frame of an animation: a 1×1 first frame used to stand for a GIF whose later frame
    /// was 16000×16000.
    @Test func everyFrameIsBudgetedNotJustTheFirst() throws {
        let lying = Self.gif(canvas: (1, 1), frames: [(1, 1), (16000, 16000)])
        // Refused from the frames' headers: nothing decoded.
        let counter = ImagePipeline.DecodeCounter()
        ImagePipeline.$observer.withValue(counter) {
            expectTooLarge({ _ = try run(lying, .gif, "resize(10x10) |> format(gif)") }, mentioning: "frame 2 is 16000x16000")
        }
        #expect(counter.count == 0, "the frames were decoded")
        // Many frames within each limit, too many pixels together.
        let many = Self.gif(canvas: (4000, 4000), frames: Array(repeating: (4000, 4000), count: 10))
        expectTooLarge({ _ = try run(many, .gif, "resize(10x10) |> format(gif)") }, mentioning: "the 10 frames hold 160.0 MP")
        // Small frames on a big canvas: coalescing makes every frame canvas-sized.
        let canvas = Self.gif(canvas: (9000, 9000), frames: [(1, 1), (1, 1)])
        expectTooLarge({ _ = try run(canvas, .gif, "format(gif)") }, mentioning: "the coalesced animation would be 2 frames of 9000x9000")
        // Too many frames, counted from the blocks before any coder builds a list of them.
        var limits = ImageLimits()
        limits.maxFrames = 5
        expectTooLarge(
            { _ = try run(Self.gif(canvas: (2, 2), frames: Array(repeating: (2, 2), count: 9)), .gif, "format(gif)", limits: limits) },
            mentioning: "frames, over the 5-frame limit")
        // A real small animation passes; a still output keeps (and budgets) only its first frame.
        let real = try SampleImages.animatedGIF(frames: 3)
        #expect(try run(real, .gif, "resize(30x30) |> format(gif)").width == 30)
        limits = ImageLimits()
        limits.maxPixels = 60 * 40 * 2  // the source's three frames fit, not three 60x40 outputs
        expectTooLarge({ _ = try run(real, .gif, "format(gif)", limits: limits) }, mentioning: "the 3 frames hold")
    }

    @Test func theGIFWalkReadsEveryDescriptor() throws {
        let gif = Self.gif(canvas: (30, 20), frames: [(1, 2), (3, 4), (5, 6)])
        let walked = try #require(DeclaredSize.gifFrames(gif, maxFrames: 300))
        #expect(walked.canvas == ImageSize(width: 30, height: 20))
        #expect(walked.frames == [ImageSize(width: 1, height: 2), ImageSize(width: 3, height: 4), ImageSize(width: 5, height: 6)])
        let real = try SampleImages.animatedGIF(frames: 4, width: 60, height: 40)
        #expect(try #require(DeclaredSize.gifFrames(real, maxFrames: 300)).frames.count == 4)
        #expect(DeclaredSize.gifFrames(Data("GIF89a".utf8), maxFrames: 300) == nil)
    }

    /// A GIF of `frames` (width, height), each with a 2-colour local table and an image of one
    /// clear code and the end code: tiny, whatever the sizes it declares.
    static func gif(canvas: (Int, Int), frames: [(Int, Int)]) -> Data {
        func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
        var b = Array("GIF89a".utf8) + le16(canvas.0) + le16(canvas.1) + [0, 0, 0]
        for (w, h) in frames {
            b += [0x21, 0xF9, 4, 0, 10, 0, 0, 0]  // graphic control: 0.1 s
            b += [0x2C] + le16(0) + le16(0) + le16(w) + le16(h) + [0x80]
            b += [0, 0, 0, 255, 255, 255]  // local colour table, 2 entries
            b += [2, 1, 0x2C, 0]  // LZW: clear (4), end (5) in 3 bits each
        }
        return Data(b + [0x3B])
    }
}

/// `blur` and `sharpen` on the separable Gaussian: the same images as ImageMagick's 2-D
/// kernels, at a fraction of the time (measured in `halcyon bench`, not asserted here).
@Suite(.cpuHeavy) struct SeparableEffectTests {
    static func samples(_ image: MagickImage) -> [UInt16] { ResamplerTests.samples(image) }

    /// Each step against the ImageMagick 2-D kernel it replaces, at small and large sigmas.
    @Test(arguments: ["blur", "sharpen"], [0.5, 1.0, 2.5, 6.0])
    func matchesTheTwoDimensionalKernel(step: String, sigma: Double) throws {
        let photo = try SampleImages.photo(width: 320, height: 240, seed: 8, format: .png)
        let reference = try MagickImage.decode(photo, format: .png)
        let kernel = step == "blur" ? MagickGaussianBlurImage(reference.wand, 0, sigma) : MagickSharpenImage(reference.wand, 0, sigma)
        #expect(kernel == MagickTrue)
        let ours = try MagickImage.decode(photo, format: .png)
        if step == "blur" { try ours.blur(sigma: sigma) } else { try ours.sharpen(sigma: sigma) }
        let db = QualityReference.psnr(Self.samples(ours), Self.samples(reference))
        #expect(db > 44, "\(step)(\(sigma)): \(db) dB against ImageMagick's 2-D kernel")
    }

    /// Above the crossover it is ImageMagick's separable `-blur` itself.
    @Test func largeSigmasUseTheSeparableBlur() throws {
        let photo = try SampleImages.photo(width: 200, height: 150, seed: 10, format: .png)
        let reference = try MagickImage.decode(photo, format: .png)
        #expect(MagickBlurImage(reference.wand, 0, 3) == MagickTrue)
        let ours = try MagickImage.decode(photo, format: .png)
        try ours.blur(sigma: 3)
        #expect(Self.samples(ours) == Self.samples(reference))
    }
}

/// Cancellation reaches the pipeline: nothing starts once the job is abandoned.
@Suite(.cpuHeavy) struct PipelineCancellationTests {
    @Test func anAbandonedJobDecodesNothing() throws {
        let flag = CancellationFlag()
        flag.cancel()
        let counter = ImagePipeline.DecodeCounter()
        let photo = try SampleImages.photo(width: 64, height: 48, seed: 2)
        ImagePipeline.$observer.withValue(counter) {
            #expect { _ = try ImagePipeline.run(photo, format: .jpeg, chains: [try ProcessorChain.parse("blur(2)")], cancel: flag) } throws: {
                "\($0)" == "\(HalcyonError.abandoned)"
            }
        }
        #expect(counter.count == 0)
    }
}
