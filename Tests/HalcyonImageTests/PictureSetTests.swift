import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonRuntime
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// Picture sets (`breakpoints`) on real photographs and a flat graphic: the widths by bytes,
/// every rung at its floor by the reference SSIMULACRA2, the limits before the work.
@Suite(.cpuHeavy) struct PictureSetTests {
    static let hasReference = ProcessInfo.processInfo.environment["HALCYON_TEST_PYTHON"] != nil

    /// A flat graphic: two colours and a caption, as a logo or a chart is.
    static func graphic() throws -> Data {
        let (w, h) = (800, 500)
        var px = [UInt8]()
        px.reserveCapacity(w * h * 3)
        for y in 0..<h { for x in 0..<w { px += (x / 200 + y / 125) % 2 == 0 ? [20, 60, 140] : [240, 200, 40] } }
        return try SampleImages.encode(
            pixels: SampleImages.captioned(px, width: w, height: h), width: w, height: h, alpha: false, format: .png, quality: 95)
    }

    static func set(_ data: Data, _ chain: String, limits: ImageLimits = ImageLimits()) throws -> ProcessedImage {
        try ImagePipeline.run(data, format: try #require(ImageFormat.sniff(data)), chain: ProcessorChain.parse(chain), limits: limits)
    }

    /// The set's rules, on its rungs: per format widths and bytes strictly increasing, at most
    /// `max_images`, the largest `max_width` (or the image's width), every format's widths among
    /// those of the format of the most bytes at the top, where each rung is at least the step
    /// above the one below but the last; each rung's bytes decode to its size; `data` the
    /// fallback's largest.
    func checkRules(_ out: ProcessedImage, _ step: BreakpointsStep, sourceWidth: Int, stepBytes: Int? = nil) throws {
        let rungs = try #require(out.rungs)
        let formats = step.formats.map(\.imageFormat)
        let tops = formats.map { f in rungs.last { $0.format == f }!.data.count }
        let widest = formats[tops.lastIndex(of: tops.max()!)!]
        let widths = rungs.filter { $0.format == widest }.map(\.width)
        #expect(!widths.isEmpty && widths.count <= step.maxImages, "\(widths)")
        for format in formats {
            let own = rungs.filter { $0.format == format }
            #expect(
                zip(own, own.dropFirst()).allSatisfy { $0.width < $1.width && $0.data.count < $1.data.count },
                "\(format): \(own.map { ($0.width, $0.data.count) })")
            #expect(own.last?.width == min(step.maxWidth, sourceWidth))
            #expect(Set(own.map(\.width)).isSubset(of: widths), "\(format)")
        }
        #expect(rungs.map(\.format) == formats.flatMap { f in rungs.filter { $0.format == f }.map { _ in f } }, "by format, in the step's order")
        let bytes = rungs.filter { $0.format == widest }.map(\.data.count)
        for i in bytes.indices.dropFirst().dropLast() {
            #expect(bytes[i] - bytes[i - 1] >= (stepBytes ?? step.bytesStep), "\(widest) rung \(i): \(bytes)")
        }
        for (i, rung) in rungs.enumerated() where i < rungs.count - 1 {
            #expect((rung.score ?? 100) >= step.minScore, "\(rung.format) \(rung.width): \(rung.score ?? -1) under the floor")
        }
        for rung in rungs {
            let decoded = try MagickImage.decode(rung.data, format: rung.format)
            #expect((decoded.width, decoded.height) == (rung.width, rung.height))
            #expect(ImageFormat.sniffOutput(rung.data) == rung.format)
        }
        #expect(out.data == rungs.last!.data && out.format == formats.last! && out.width == widths.last!)
    }

    @Test func aPhotographAndAGraphicHoldTheSetsRules() throws {
        let chain = "breakpoints(min_width=160,max_width=800,bytes_step=6000,max_images=6,formats=avif|webp|jpeg,min_score=70)"
        let step = try #require(try Chain.parse(chain).breakpoints)
        let photo = try Data(contentsOf: publicFixture("photos/fox.jpg"))
        let started = ContinuousClock.now
        let set = try Self.set(photo, chain)
        print(
            "fox.jpg: \(set.rungs!.map { "\($0.format) \($0.width) \($0.data.count) q\($0.quality ?? 0) s\(Int($0.score ?? 0))" }), \(set.encodes) encodes, \(ContinuousClock.now - started)"
        )
        try checkRules(set, step, sourceWidth: 800)
        #expect(set.rungs!.count >= 3 * 3, "a detailed photograph from 160 to 800 px spans several steps of 6 kB")

        let flat = try Self.set(try Self.graphic(), chain)
        print("graphic: \(flat.rungs!.map { "\($0.format) \($0.width) \($0.data.count)" })")
        try checkRules(flat, step, sourceWidth: 800)
        #expect(flat.rungs!.count < set.rungs!.count, "a flat graphic needs fewer widths than a photograph")
    }

    @Test func maxImagesWinsOverTheStep() throws {
        let chain = "breakpoints(min_width=100,max_width=800,bytes_step=1000,max_images=3,formats=webp|jpeg,min_score=70)"
        let step = try #require(try Chain.parse(chain).breakpoints)
        let set = try Self.set(try Data(contentsOf: publicFixture("photos/tiger.jpg")), chain)
        try checkRules(set, step, sourceWidth: 800)
        #expect(Set(set.rungs!.map(\.width)).count == 3, "three widths: the step widened to fit them")
    }

    @Test func neverUpscaledAndOneWidthWhenTheImageIsNarrow() throws {
        // 451 px wide, narrower than min_width: one width, its own.
        let set = try Self.set(
            try Data(contentsOf: publicFixture("photos/chelsea.jpg")), "breakpoints(min_width=480,max_width=1600,formats=webp|jpeg)")
        #expect(set.rungs!.map(\.width) == [451, 451] && set.rungs!.map(\.format) == [.webp, .jpeg])
        #expect(set.width == 451 && set.height == 300)
    }

    /// A 40-megapixel source: 20 widths up to 4000 px in three formats is refused from its
    /// header (about 310 s of work expected); 20 widths up to the default 1600 px (expected at 66 s,
    /// measured at 32 s) is refused at a 30-second deadline, and planned at the default one.
    @Test func aLargeSourceAskingTooMuchIsRefusedBeforeItsDecode() throws {
        let large = try SampleImages.solid(width: 7728, height: 5152, red: 90, green: 120, blue: 30, format: .jpeg)
        func refusal(_ chain: String, limits: ImageLimits = ImageLimits()) -> HalcyonError? {
            do {
                _ = try Self.set(large, chain, limits: limits)
                return nil
            } catch {
                return error as? HalcyonError
            }
        }
        let started = ContinuousClock.now
        let wide = refusal("breakpoints(max_width=4000, max_images=20, formats=avif|webp|jpeg)")
        #expect(wide?.code == .tooCostly && wide?.message.contains("lower max_images, max_width or the formats") == true, "\(wide as Any)")
        var tight = ImageLimits()
        tight.maxJobTime = .seconds(30)
        let twenty = refusal("breakpoints(max_images=20, formats=avif|webp|jpeg)", limits: tight)
        #expect(
            twenty?.code == .tooCostly && twenty?.message.hasPrefix("breakpoints on 7728x5152: about 96 quality searches") == true, "\(twenty as Any)"
        )
        #expect(ContinuousClock.now - started < .seconds(5), "refused before any pixel is decoded")
        // At the default deadline the same set is planned (a flat image: it is made in moments).
        let step = try #require(try Chain.parse("breakpoints(max_images=20, formats=avif|webp|jpeg)").breakpoints)
        #expect(step.work(from: ImageSize(width: 7728, height: 5152)) < ImageLimits().maxWork)
    }

    @Test func theDeadlineStopsASetBetweenRungs() throws {
        var limits = ImageLimits()
        limits.maxJobTime = .seconds(1)
        limits.pixelTapsPerSecond = 1e12  // past the estimate: the deadline is what stops it
        let started = ContinuousClock.now
        #expect {
            try Self.set(
                try Data(contentsOf: publicFixture("photos/fox.jpg")), "breakpoints(min_width=100,max_width=800,bytes_step=1000,max_images=20)",
                limits: limits)
        } throws: { ($0 as? HalcyonError)?.code == .tooCostly }
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test func cancellationStopsASet() throws {
        let flag = CancellationFlag()
        flag.cancel()
        #expect {
            try ImagePipeline.run(
                try Data(contentsOf: publicFixture("photos/fox.jpg")), format: .jpeg,
                chains: [ProcessorChain.parse("breakpoints(max_width=800)")], cancel: flag)[0].get()
        } throws: { ($0 as? HalcyonError)?.code == HalcyonError.abandoned.code }
    }

    /// Against PyPI's ssimulacra2, on rungs of 225 pixels a side and more: below that the port
    /// stops a scale before libjxl does and its weights run on misaligned (a 200×133 rung that
    /// libjxl's rule scores 75 scores 54–65 there), so smaller rungs are held to this build's
    /// metric, which follows libjxl.
    @Test(.enabled(if: hasReference, "needs scripts/test's HALCYON_TEST_PYTHON"))
    func everyRungReachesItsFloorByTheReferenceScore() throws {
        let chain = "breakpoints(min_width=360,max_width=800,bytes_step=8000,max_images=4,formats=avif|webp|jpeg,min_score=75)"
        let dir = try TestEnvironment.temporaryDirectory("picture-set")
        var pairs: [SSIMULACRA2Tests.Pair] = [], rungs: [EncodedRung] = []
        for name in ["fox.jpg", "hubble-deep-field.jpg"] {
            let data = try Data(contentsOf: publicFixture("photos/\(name)"))
            let set = try Self.set(data, chain)
            let source = try MagickImage.decode(data, format: .jpeg)
            try source.autoOrient()
            try source.toSRGB()
            for (i, rung) in set.rungs!.enumerated() {
                // The rung's own pixels, as the set made them: the source resized to its width.
                let reference = source.clone()
                try reference.resize(width: rung.width, height: rung.height)
                let ref = try reference.firstFrameSamples8(for: "test")
                let dist = try MagickImage.decode(rung.data, format: rung.format, firstFrameOnly: true).firstFrameSamples8(for: "test")
                let refFile = dir.appendingPathComponent("\(name)-\(i).ref"), distFile = dir.appendingPathComponent("\(name)-\(i).dist")
                try Data(ref.pixels).write(to: refFile)
                try Data(dist.pixels).write(to: distFile)
                pairs.append(
                    .init(
                        ref: refFile.path, dist: distFile.path, width: ref.width, height: ref.height, refChannels: ref.channels,
                        distChannels: dist.channels))
                rungs.append(rung)
            }
        }
        let manifest = dir.appendingPathComponent("pairs.json")
        try JSONEncoder().encode(pairs).write(to: manifest)
        let theirs = try JSONDecoder().decode([Double].self, from: Data(try referencePython(SSIMULACRA2Tests.oracle, [manifest.path]).utf8))
        try #require(theirs.count == rungs.count)
        for (rung, score) in zip(rungs, theirs) {
            #expect(min(rung.width, rung.height) >= 225)
            #expect(score >= 75 - 0.5, "\(rung.format) \(rung.width): reference \(score), ours \(rung.score ?? -1)")
            #expect((rung.score ?? 0) >= 75, "\(rung.format) \(rung.width): the search reached its floor")
        }
    }
}
