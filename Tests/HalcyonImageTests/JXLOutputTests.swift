import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// JPEG XL outputs through libjxl, each decoded by libjxl's own tool (`djxl`, Debian's
/// libjxl-tools): fixed and perceptual qualities, alpha, lossless pixels, and the lossless
/// recompression of a JPEG, given back byte for byte.
@Suite(.cpuHeavy) struct JXLOutputTests {
    static func run(_ source: Data, format: ImageFormat = .jpeg, _ chain: String, direct: Bool = true) throws -> ProcessedImage {
        try ImagePipeline.run(source, format: format, chains: [ProcessorChain.parse(chain)], directLane: direct)[0].get()
    }

    /// Runs `djxl` on `jxl`, writing `name` (its extension picks the output: .png pixels, .jpg the
    /// reconstructed JPEG); the file's bytes.
    static func djxl(_ jxl: Data, to name: String) throws -> Data {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("halcyon-djxl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("in.jxl"), output = dir.appendingPathComponent(name)
        try jxl.write(to: input)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/djxl")
        process.arguments = [input.path, output.path, "--num_threads=0"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "djxl failed on a \(jxl.count)-byte output")
        return try Data(contentsOf: output)
    }

    /// 8-bit RGB(A) samples of a PNG, decoded by ImageMagick.
    static func samples(_ png: Data) throws -> (pixels: [UInt8], width: Int, height: Int, channels: Int) {
        try MagickImage.decode(png, format: .png).firstFrameSamples8(for: "test")
    }

    static let photos = ["dog", "hubble-deep-field", "paris", "tiger"]

    /// Fixed qualities in both lanes: every output decodes with djxl, at the chain's size; the
    /// score of libjxl's decode inside the worker equals the score of djxl's; a higher quality
    /// scores higher and costs more bytes.
    @Test(arguments: [true, false])
    func fixedQualitiesDecodeWithDjxl(direct: Bool) throws {
        for name in Self.photos {
            let source = try Data(contentsOf: publicFixture("photos/\(name).jpg"))
            let reference = try PerceptualOutputTests.reference(source, "resize(400x400)")
            var last: (score: Double, bytes: Int)?
            for quality in [50, 80, 95] {
                let out = try Self.run(source, "resize(400x400) |> format(jxl, quality=\(quality), effort=5)", direct: direct)
                #expect(out.format == .jxl && ImageFormat.sniffOutput(out.data) == .jxl && out.quality == quality)
                let png = try Self.djxl(out.data, to: "out.png")
                let decoded = try Self.samples(png)
                #expect((decoded.width, decoded.height) == (out.width, out.height), "\(name) q\(quality)")
                let score = try reference.score(encoded: out.data, format: .jxl)
                #expect(abs(try reference.score(encoded: png, format: .png) - score) < 0.05, "\(name) q\(quality): libjxl in-process vs djxl")
                if let last { #expect(score > last.score && out.data.count > last.bytes, "\(name) q\(quality)") }
                last = (score, out.data.count)
            }
        }
    }

    /// `quality=auto` reaches its target by the score of djxl's decode, in at most six encodes;
    /// `format(auto)` with jxl among its formats keeps the smaller result.
    @Test func autoQualityReachesTheTarget() throws {
        let source = try Data(contentsOf: publicFixture("photos/paris.jpg"))
        let reference = try PerceptualOutputTests.reference(source, "resize(480x480)")
        let out = try Self.run(source, "resize(480x480) |> format(jxl, quality=auto, min_score=80, effort=5)")
        let score = try #require(out.score)
        #expect(out.format == .jxl && score >= 80 && score < 86 && out.encodes <= 6, "\(score) in \(out.encodes) encodes")
        #expect(abs(try reference.score(encoded: Self.djxl(out.data, to: "out.png"), format: .png) - score) < 0.05)
        let jpeg = try Self.run(source, "resize(480x480) |> format(jpeg, quality=auto, min_score=80)")
        let either = try Self.run(source, "resize(480x480) |> format(auto, formats=jpeg|jxl, min_score=80, effort=5)")
        let eitherScore = try #require(either.score)
        #expect([.jpeg, .jxl].contains(either.format) && eitherScore >= 80)
        #expect(either.data.count <= min(jpeg.data.count, out.data.count), "\(either.format): \(either.data.count) bytes")
    }

    /// Alpha survives a lossy JPEG XL; lossless=true keeps every sample of a PNG, alpha included,
    /// and of a JPEG's pixels once a step has changed them.
    @Test func alphaAndLosslessPixels() throws {
        let png = try Data(contentsOf: publicFixture("pngsuite/basn6a08.png"))
        let lossy = try Self.run(png, format: .png, "format(jxl, quality=80)")
        let decoded = try #require(try SSIMULACRA2Reference.decodeWithCodec(lossy.data, format: .jxl, width: 32, height: 32))
        #expect(decoded.channels == 4)
        // Written, never read by ImageMagick.
        let refused = #expect(throws: HalcyonError.self) { try MagickImage.decode(lossy.data, format: .jxl) }
        #expect(refused?.code == .unsupportedFormat)
        let lossless = try Self.run(png, format: .png, "format(jxl, lossless=true)")
        #expect(lossless.quality == 100)
        let original = try Self.samples(png), back = try Self.samples(Self.djxl(lossless.data, to: "out.png"))
        #expect(back.channels == 4 && back.pixels == original.pixels, "lossless RGBA")
        let photo = try Data(contentsOf: publicFixture("photos/dog.jpg"))
        let resized = try Self.run(photo, "resize(300x300) |> format(jxl, lossless=true)")
        let pixels = try Self.run(photo, "resize(300x300) |> format(png)")
        #expect(resized.quality == 100)
        #expect(try Self.samples(Self.djxl(resized.data, to: "out.png")).pixels == Self.samples(pixels.data).pixels)
    }

    /// `format(jxl, lossless=true)` of an untouched JPEG recompresses the JPEG itself: smaller,
    /// and djxl gives the original back byte for byte (no quality recorded). A JPEG libjxl
    /// cannot take (arithmetic coding) is kept as lossless pixels instead.
    @Test func losslessRecompressionGivesTheJPEGBack() throws {
        let names = Self.photos.map { "photos/\($0).jpg" } + ["libjpeg-turbo/testorig.jpg", "libjpeg-turbo/testimgint.jpg"]
        var saved: [String] = []
        for name in names {
            // These carry no metadata: dropping it changes nothing.
            let jpeg = try Data(contentsOf: publicFixture(name))
            for effort in [7, 3] {
                let out = try Self.run(jpeg, "format(jxl, lossless=true, effort=\(effort))")
                #expect(out.format == .jxl && out.quality == nil, "\(name)")
                #expect(out.data.count < jpeg.count, "\(name): \(out.data.count) bytes from \(jpeg.count)")
                #expect(try Self.djxl(out.data, to: "back.jpg") == jpeg, "\(name): not reconstructed byte for byte")
                if effort == 7 { saved.append(String(format: "%.2f", Double(out.data.count) / Double(jpeg.count))) }
            }
        }
        print("jxl recompression, bytes against the JPEG: \(saved.joined(separator: " "))")
        // A JPEG with an EXIF rotation: its EXIF is dropped but its orientation kept (a minimal
        // EXIF of its own, which libjxl carries into the codestream), so djxl's pixels are upright,
        // at the size recorded (the size every other output of it has); the image data is the
        // original's byte for byte. With keep_metadata=true the whole file comes back.
        let rotated = try Data(contentsOf: publicFixture("exif-orientation-examples/Landscape_6.jpg"))
        let upright = try Self.run(rotated, "format(jxl, lossless=true)")
        let back = try Self.djxl(upright.data, to: "back.jpg")
        #expect(back != rotated && back.suffix(from: back.count - 40_000) == rotated.suffix(from: rotated.count - 40_000))
        #expect(back.range(of: Data(JPEGMetadata.minimalEXIF(orientation: 6).dropFirst(4))) != nil, "the orientation's EXIF")
        let shown = try Self.samples(Self.djxl(upright.data, to: "out.png"))
        let png = try Self.run(rotated, "format(png)")
        #expect((shown.width, shown.height) == (upright.width, upright.height) && (png.width, png.height) == (upright.width, upright.height))
        #expect(try Self.djxl(Self.run(rotated, "format(jxl, lossless=true, keep_metadata=true)").data, to: "back.jpg") == rotated)
        let arithmetic = try Data(contentsOf: publicFixture("libjpeg-turbo/testimgari.jpg"))
        let kept = try Self.run(arithmetic, "format(jxl, lossless=true)")
        #expect(kept.format == .jxl && kept.quality == 100)
        let decoded = try Self.run(arithmetic, "format(png)")
        #expect(try Self.samples(Self.djxl(kept.data, to: "out.png")).pixels == Self.samples(decoded.data).pixels)
    }

    /// Metadata a user did not ask to publish — comments, XMP, IPTC, a payload after the image —
    /// is dropped before the recompression, as from every other output; `keep_metadata=true`
    /// keeps the file whole.
    @Test func recompressionDropsMetadataUnlessAskedToKeepIt() throws {
        let photo = [UInt8](try Data(contentsOf: publicFixture("photos/dog.jpg")))
        func segment(_ marker: UInt8, _ text: String) -> [UInt8] {
            let payload = Array(text.utf8)
            return [0xFF, marker, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)] + payload
        }
        let laden = Data(
            photo[0..<20] + segment(0xFE, "secret comment") + segment(0xE1, "http://ns.adobe.com/xap/1.0/\0<x:xmpmeta>secret xmp")
                + segment(0xED, "Photoshop 3.0\0secret iptc") + photo[20...] + Array("PK\u{3}\u{4}secret zip".utf8))
        #expect(Array(photo[2...3]) == [0xFF, 0xE0] && photo[4] == 0 && photo[5] == 16, "dog.jpg starts with a 16-byte JFIF segment")
        let out = try Self.run(laden, "format(jxl, lossless=true)")
        #expect(out.data.range(of: Data("secret".utf8)) == nil)
        #expect(try Self.djxl(out.data, to: "back.jpg") == Data(photo))
        let kept = try Self.run(laden, "format(jxl, lossless=true, keep_metadata=true)")
        #expect(try Self.djxl(kept.data, to: "back.jpg") == laden)
        // The walk: a truncated JPEG is not stripped (nil: the pipeline refuses such a source before
        // this); a JPEG without metadata comes out as it went in; the minimal EXIF reads back as
        // its orientation.
        #expect(JPEGMetadata.stripped(Data(photo.prefix(photo.count / 2)), orientation: 1) == nil)
        #expect(JPEGMetadata.stripped(Data(photo), orientation: 1) == Data(photo))
        let exif = Data(JPEGMetadata.minimalEXIF(orientation: 8).dropFirst(10))
        #expect(ExifReader(exif)?.read().orientation == 8)
    }

    /// A JPEG's recompression is planned as what it costs (a fraction of a lossless encode of its
    /// pixels), and its fallback to pixels is held to the limits before it runs.
    @Test func recompressionIsBudgetedAsItself() throws {
        let chain = try ProcessorChain.parse("format(jxl, lossless=true)")
        let camera = ImageSize(width: 8000, height: 6000)
        try ImageLimits().plan(chain, from: camera, frames: 1, recompression: true)
        let refused = #expect(throws: HalcyonError.self) { try ImageLimits().plan(chain, from: camera, frames: 1) }
        #expect(refused?.code == .imageTooLarge)
        func run(_ name: String, maxPixels: Int) throws -> ProcessedImage {
            var limits = ImageLimits()
            limits.maxPixels = maxPixels
            let jpeg = try Data(contentsOf: publicFixture(name))
            return try ImagePipeline.run(jpeg, format: .jpeg, chains: [chain], limits: limits)[0].get()
        }
        // dog.jpg is 0.48 megapixels: recompressed within 1 megapixel, which its lossless pixels are not.
        #expect(try run("photos/dog.jpg", maxPixels: 1_000_000).quality == nil)
        // An arithmetic-coded JPEG cannot be recompressed; its pixels' lossless encode is over the budget.
        let fallback = #expect(throws: HalcyonError.self) { try run("libjpeg-turbo/testimgari.jpg", maxPixels: 100_000) }
        #expect(fallback?.code == .imageTooLarge, "\(String(describing: fallback))")
        #expect(try run("libjpeg-turbo/testimgari.jpg", maxPixels: 1_000_000).quality == 100)
    }

    /// Efforts above 7 hold about five times the memory: a large output is encoded at 7, and
    /// the budget counts libjxl's working memory before anything is decoded.
    @Test func largeOutputsAreBoundedBeforeTheEncode() throws {
        #expect(FormatStep.jxlEffort(9, for: 1_000_000) == 9)
        #expect(FormatStep.jxlEffort(9, for: 1_000_001) == 7)
        #expect(FormatStep.jxlEffort(5, for: 50_000_000) == 5)
        var limits = ImageLimits()
        limits.maxPixels = 30_000_000
        let chain = try ProcessorChain.parse("resize(4000x3000, mode=stretch) |> format(jxl, quality=80)")
        let size = ImageSize(width: 100, height: 100)
        let error = #expect(throws: HalcyonError.self) { try limits.plan(chain, from: size, frames: 1, watermarks: [:]) }
        #expect(error?.code == .imageTooLarge && error?.message.contains("to encode 4000x3000 as jxl") == true, "\(String(describing: error))")
        // The same output as a JPEG holds no encoder memory of that size.
        try limits.plan(ProcessorChain.parse("resize(4000x3000, mode=stretch) |> format(jpeg, quality=80)"), from: size, frames: 1, watermarks: [:])
        // Effort 9 costs more work than effort 7 on a small output, the same on a large one.
        let small = ImageSize(width: 800, height: 600), large = ImageSize(width: 2000, height: 1500)
        let e7 = try #require(ProcessorChain.parse("format(jxl, effort=7)").formatStep)
        let e9 = try #require(ProcessorChain.parse("format(jxl, effort=9)").formatStep)
        #expect(e9.work(from: small) > 10 * e7.work(from: small))
        #expect(e9.work(from: large) == e7.work(from: large))
        // A lossless encode costs several times a lossy one, in work and in memory.
        let lossless = try #require(ProcessorChain.parse("format(jxl, lossless=true)").formatStep)
        #expect(lossless.writesLosslessJXL && !e7.writesLosslessJXL && lossless.work(from: large) > 10 * e7.work(from: large))
        #expect(FormatStep.jxlPixelCost(7, lossless: true) > FormatStep.jxlPixelCost(7, lossless: false))
        // quality=auto never searches up to JPEG XL's lossless 100.
        let noise = try SampleImages.noise(width: 64, height: 64, seed: 3)
        let auto = try Self.run(noise, format: .png, "format(jxl, quality=auto, min_score=95, effort=3)")
        #expect((auto.quality ?? 100) <= 99, "quality \(String(describing: auto.quality))")
    }
}
