import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// The output steps of #18: animated WebP, `max_bytes`, `trim`, `pad`/`extend`, `border` and
/// `round_corner(R%)`.
@Suite(.cpuHeavy) struct OutputStepTests {
    static let photo: Data = try! SampleImages.photo(width: 640, height: 360, seed: 8)

    @Test func webpKeepsAnAnimationLikeGIF() throws {
        let gif = try SampleImages.animatedGIF(frames: 6)
        let (webp, back) = try Fixture.run(gif, "resize(30x20) |> format(webp, quality=80)")
        #expect(webp.format == .webp && back.frameCount == 6)
        #expect((back.width, back.height) == (30, 20))
        // The first and last frames are still blue and red.
        #expect(back.pixel(x: 15, y: 10).blue > 0.8)
        let (_, png) = try Fixture.run(gif, "format(png)")
        #expect(png.frameCount == 1)
    }

    /// A still output of an animation (its first frame only is decoded) is written in the
    /// chain's format: the decode's frame selection must not pick the coder of the write too.
    @Test(arguments: ["format(jpeg, quality=80)", "format(png, progressive=true)", "format(avif)"])
    func aStillOfAnAnimationIsInTheChainsFormat(format: String) throws {
        let gif = try SampleImages.animatedGIF(frames: 4, width: 60, height: 40)
        let chain = try ProcessorChain.parse("resize(30x20, mode=fill) |> " + format)
        let out = try ImagePipeline.run(gif, format: .gif, chains: [chain])[0].get()
        #expect(ImageFormat.sniff(out.data) == out.format, "\(format): \(out.data.prefix(4).map { String($0, radix: 16) })")
        #expect(out.format != .gif)
    }

    /// Steps that copy a frame to look at it (trim, placeholders, smart crops) copy one frame,
    /// and the animation keeps all of its frames.
    @Test func frameCopiesLeaveAnimationsWhole() throws {
        let gif = try SampleImages.animatedGIF(frames: 5, width: 60, height: 40)
        let chain = try ProcessorChain.parse("trim |> resize(30x30, mode=fill, gravity=attention) |> format(gif)")
        let out = try ImagePipeline.run(gif, format: .gif, chains: [chain], placeholders: [PlaceholderRequest(kinds: [.dominant_color])])[0].get()
        #expect(try MagickImage.decode(out.data, format: .gif).frameCount == 5)
        #expect((out.width, out.height) == (30, 30))
        #expect(out.placeholders?.dominantColor?.count == 7)
    }

    /// The highest quality that fits: under the limit, and more bytes than the lowest quality.
    @Test(arguments: [true, false])
    func maxBytesSearchesTheQualityDown(direct: Bool) throws {
        let chain = try ProcessorChain.parse("resize(400x400) |> format(jpeg, quality=95, max_bytes=12000)")
        let out = try ImagePipeline.run(Self.photo, format: .jpeg, chains: [chain], directLane: direct)[0].get()
        #expect(out.data.count <= 12000)
        let floor = try ImagePipeline.run(
            Self.photo, format: .jpeg, chains: [try ProcessorChain.parse("resize(400x400) |> format(jpeg, quality=10)")], directLane: direct)[0].get()
        let unlimited = try ImagePipeline.run(
            Self.photo, format: .jpeg, chains: [try ProcessorChain.parse("resize(400x400) |> format(jpeg, quality=95)")], directLane: direct)[0].get()
        #expect(unlimited.data.count > 12000, "the limit must bind for this test to mean anything")
        #expect(out.data.count > floor.data.count)
        // The quality recorded is the one the search settled on: its bytes are that quality's,
        // and one step higher no longer fits.
        #expect((unlimited.quality, floor.quality) == (95, 10))
        let q = try #require(out.quality)
        #expect((11..<95).contains(q))
        let again = try ImagePipeline.run(
            Self.photo, format: .jpeg, chains: [try ProcessorChain.parse("resize(400x400) |> format(jpeg, quality=\(q))")], directLane: direct)[0]
            .get()
        #expect(again.data == out.data && again.quality == q)
        let above = try ImagePipeline.run(
            Self.photo, format: .jpeg, chains: [try ProcessorChain.parse("resize(400x400) |> format(jpeg, quality=\(q + 1))")], directLane: direct)[0]
            .get()
        #expect(above.data.count > 12000)
        #expect(out.score == nil)
        let webp = try Fixture.run(Self.photo, "resize(400x400) |> format(webp, quality=90, max_bytes=6000, min_quality=5)").0
        #expect(webp.data.count <= 6000 && webp.format == .webp)
    }

    /// The search finds the highest quality that fits, in at most 9 encodes, whatever the limit.
    @Test func theSearchIsBoundedAndExact() throws {
        for limit in [0, 1, 37, 500, 999, 1000, 5000] {
            var calls = 0
            // Bytes grow with quality: 10 per step.
            let found = try? FormatStep.encode(fitting: limit, quality: 100, minQuality: 1) { q throws(HalcyonError) in
                calls += 1
                return Data(count: q * 10)
            }
            #expect(calls <= 9, "\(calls) encodes for \(limit)")
            let best = min(100, limit / 10)
            #expect(found?.data.count == (best >= 1 ? best * 10 : nil), "limit \(limit)")
            // The quality returned is the one its bytes were encoded at.
            #expect(found.map { $0.quality * 10 } == found?.data.count, "limit \(limit)")
        }
    }

    @Test func aLimitNoQualityMeetsFailsWithItsOwnCode() throws {
        #expect {
            try Fixture.run(Self.photo, "resize(400x400) |> format(jpeg, max_bytes=200)")
        } throws: { error in
            (error as? HalcyonError)?.code == .overMaxBytes && (error as? HalcyonError)?.permanent == true
        }
    }

    @Test func trimRemovesAUniformBorder() throws {
        var pixels = [UInt8](repeating: 255, count: 100 * 80 * 3)
        for y in 20..<60 { for x in 20..<80 { pixels[(y * 100 + x) * 3 + 1] = 0 } }  // a magenta 60×40 box
        let png = try SampleImages.encode(pixels: pixels, width: 100, height: 80, alpha: false, format: .png, quality: 95)
        let (out, image) = try Fixture.run(png, "trim |> format(png)")
        #expect((out.width, out.height) == (60, 40))
        #expect(image.pixel(x: 0, y: 0).green < 0.1)
        // One colour: nothing to keep apart from the border, so nothing is trimmed.
        let flat = try Fixture.solid(50, 30, [10, 200, 30])
        #expect(try Fixture.run(flat, "trim(fuzz=0.1)").0.width == 50)
    }

    @Test func padGrowsTheCanvasAndPlacesTheImage() throws {
        let red = try Fixture.solid(100, 50, [250, 0, 0])
        let (out, image) = try Fixture.run(red, "pad(200x200, color=blue) |> format(png)")
        #expect((out.width, out.height) == (200, 200))
        #expect(image.pixel(x: 100, y: 100).red > 0.9 && image.pixel(x: 5, y: 5).blue > 0.9)
        let (_, north) = try Fixture.run(red, "extend(200x200, color=blue, gravity=north) |> format(png)")
        #expect(north.pixel(x: 100, y: 10).red > 0.9 && north.pixel(x: 100, y: 190).blue > 0.9)
        let (_, clear) = try Fixture.run(red, "pad(120x120) |> format(png)")
        #expect(clear.pixel(x: 2, y: 2).alpha < 0.1 && clear.pixel(x: 60, y: 60).alpha > 0.9)
        // Never crops: a larger image keeps its size on that axis.
        #expect(try Fixture.run(red, "pad(60x60)").0.width == 100)
        #expect(try ProcessorChain.parse("extend(10x10)").identifier == "pad(10x10,color=#00000000,gravity=center)")
    }

    @Test func borderPaintsTheEdgesAndKeepsTheSize() throws {
        let green = try Fixture.solid(80, 60, [0, 200, 0])
        let (out, image) = try Fixture.run(green, "border(5, color=blue) |> format(png)")
        #expect((out.width, out.height) == (80, 60))
        for (x, y) in [(2, 30), (77, 30), (40, 2), (40, 57)] { #expect(image.pixel(x: x, y: y).blue > 0.9, "(\(x), \(y))") }
        #expect(image.pixel(x: 40, y: 30).green > 0.7 && image.pixel(x: 6, y: 6).green > 0.7)
    }

    @Test func roundCornerTakesAPercentageOfTheWidth() throws {
        let photo = try Fixture.solid(200, 100, [200, 100, 0])
        let (_, image) = try Fixture.run(photo, "round_corner(25%) |> format(png)")
        // 25 % of 200 = 50 px: a point 10 px in from the corner is outside the arc.
        #expect(image.pixel(x: 10, y: 10).alpha < 0.1)
        #expect(image.pixel(x: 100, y: 50).alpha > 0.9)
        #expect(try ProcessorChain.parse("round_corner(25.0%)").identifier == "round_corner(25%,corners=all,background=none)")
    }

    /// zlib's FLEVEL (the level's class: 0 for 0–1, 1 for 2–5, 2 for 6, 3 for 7–9) from the
    /// first IDAT chunk's stream header.
    static func zlibLevelClass(_ png: Data) throws -> Int {
        let bytes = [UInt8](png)
        var at = 8
        while at + 8 <= bytes.count {
            let length = bytes[at..<at + 4].reduce(0) { $0 << 8 | Int($1) }
            if String(decoding: bytes[at + 4..<at + 8], as: UTF8.self) == "IDAT" { return Int(bytes[at + 9] >> 6) }
            at += 12 + length
        }
        throw HalcyonError(.processingFailed, "no IDAT")
    }

    /// `compression` changes the bytes and never the pixels, in both lanes.
    @Test(arguments: [true, false])
    func pngCompressionKeepsThePixels(direct: Bool) throws {
        func run(_ step: String) throws -> (data: Data, image: MagickImage) {
            let chain = try ProcessorChain.parse("resize(120x120) |> " + step)
            let out = try ImagePipeline.run(Self.photo, format: .jpeg, chains: [chain], directLane: direct)[0].get()
            return (out.data, try MagickImage.decode(out.data, format: .png))
        }
        let fast = try run("format(png, compression=1)"), standard = try run("format(png)"), small = try run("format(png, compression=9)")
        #expect(try [fast, standard, small].map { try Self.zlibLevelClass($0.data) } == [0, 2, 3])
        #expect(fast.data.count > standard.data.count && fast.data.count > small.data.count)
        #expect((standard.image.width, standard.image.height) == (120, 68))
        for y in 0..<standard.image.height {
            for x in 0..<standard.image.width {
                let p = standard.image.pixel(x: x, y: y)
                #expect(fast.image.pixel(x: x, y: y) == p && small.image.pixel(x: x, y: y) == p, "at \(x),\(y)")
            }
        }
    }
}
