internal import CMagickWand
import Foundation
import HalcyonDomain
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// Images built pixel by pixel, and reading pixels back.
enum Fixture {
    /// Left half `left`, right half `right` (RGB bytes).
    static func halves(_ w: Int, _ h: Int, left: [UInt8], right: [UInt8], format: ImageFormat = .png) throws -> Data {
        var px = [UInt8]()
        for _ in 0..<h { for x in 0..<w { px += x < w / 2 ? left : right } }
        return try SampleImages.encode(pixels: px, width: w, height: h, alpha: false, format: format, quality: 95)
    }

    /// Top half `top`, bottom half `bottom`.
    static func stacked(_ w: Int, _ h: Int, top: [UInt8], bottom: [UInt8]) throws -> Data {
        var px = [UInt8]()
        for y in 0..<h { for _ in 0..<w { px += y < h / 2 ? top : bottom } }
        return try SampleImages.encode(pixels: px, width: w, height: h, alpha: false, format: .png, quality: 95)
    }

    static func solid(_ w: Int, _ h: Int, _ rgb: [UInt8], format: ImageFormat = .png) throws -> Data {
        try SampleImages.solid(width: w, height: h, red: rgb[0], green: rgb[1], blue: rgb[2], format: format)
    }

    static func run(_ data: Data, _ chain: String, limits: ImageLimits = ImageLimits()) throws -> (ProcessedImage, MagickImage) {
        let format = try #require(ImageFormat.sniff(data))
        let out = try ImagePipeline.run(data, format: format, chain: ProcessorChain.parse(chain), limits: limits)
        return (out, try MagickImage.decode(out.data, format: try #require(ImageFormat.sniff(out.data))))
    }
}

func near(_ a: Double, _ b: Double, _ tolerance: Double = 0.04) -> Bool { abs(a - b) <= tolerance }

@Suite(.cpuHeavy) struct ProcessorTests {
    @Test func downsampleFitsAndNeverEnlarges() throws {
        let photo = try SampleImages.photo(width: 640, height: 360, seed: 1)
        #expect(try Fixture.run(photo, "downsample(200x200)").0.width == 200)
        #expect(try Fixture.run(photo, "downsample(200x200)").0.height == 113)
        let (same, _) = try Fixture.run(photo, "downsample(2000x2000)")
        #expect((same.width, same.height) == (640, 360))
    }

    @Test func cropAnchorPicksThePart() throws {
        let img = try Fixture.halves(100, 50, left: [255, 0, 0], right: [0, 0, 255])
        let (l, li) = try Fixture.run(img, "crop(20x20, x=0, y=0)")
        #expect((l.width, l.height) == (20, 20))
        #expect(li.pixel(x: 10, y: 10).red > 0.9 && li.pixel(x: 10, y: 10).blue < 0.1)
        let (_, ri) = try Fixture.run(img, "crop(20x20, x=1, y=1)")
        #expect(ri.pixel(x: 10, y: 10).blue > 0.9 && ri.pixel(x: 10, y: 10).red < 0.1)
        let (big, _) = try Fixture.run(img, "crop(500x500)")  // clipped to the image
        #expect((big.width, big.height) == (100, 50))
    }

    @Test func roundCornersAreTransparentWithAnOpaqueCentre() throws {
        let img = try Fixture.solid(100, 100, [200, 200, 200])
        let (_, all) = try Fixture.run(img, "round_corner(30) |> format(png)")
        #expect(all.pixel(x: 0, y: 0).alpha < 0.05)
        #expect(all.pixel(x: 99, y: 99).alpha < 0.05)
        #expect(all.pixel(x: 50, y: 50).alpha > 0.99)
        let (_, top) = try Fixture.run(img, "round_corner(30, corners=top) |> format(png)")
        #expect(top.pixel(x: 0, y: 0).alpha < 0.05)
        #expect(top.pixel(x: 0, y: 99).alpha > 0.99)
        let (_, bg) = try Fixture.run(img, "round_corner(30, background=#00ff00) |> format(png)")
        let corner = bg.pixel(x: 0, y: 0)
        #expect(corner.alpha > 0.99 && corner.green > 0.9 && corner.red < 0.1)
    }

    @Test func blurSoftensAnEdgeAndSharpenOvershootsIt() throws {
        let img = try Fixture.halves(40, 10, left: [0, 0, 0], right: [255, 255, 255])
        let (_, blurred) = try Fixture.run(img, "blur(3)")
        let edge = blurred.pixel(x: 19, y: 5).red
        #expect(edge > 0.1 && edge < 0.9)
        let grey = try Fixture.halves(40, 10, left: [100, 100, 100], right: [160, 160, 160])
        let (_, sharp) = try Fixture.run(grey, "sharpen(2)")
        #expect(sharp.pixel(x: 19, y: 5).red < 100.0 / 255 - 0.02)  // darker than the dark side
        #expect(sharp.pixel(x: 20, y: 5).red > 160.0 / 255 + 0.02)  // brighter than the bright side
    }

    @Test func overlayAndTintMoveTheColourTheRightWay() throws {
        let white = try Fixture.solid(10, 10, [255, 255, 255])
        let o = try Fixture.run(white, "overlay(red, fraction=0.5)").1.pixel(x: 5, y: 5)
        #expect(near(o.red, 1) && near(o.green, 0.5) && near(o.blue, 0.5))
        let t = try Fixture.run(white, "tint(#0000ff80)").1.pixel(x: 5, y: 5)
        #expect(near(t.red, 0.5) && near(t.green, 0.5) && near(t.blue, 1))
    }

    @Test func colorControls() throws {
        let grey = try Fixture.solid(10, 10, [128, 128, 128])
        #expect(near(try Fixture.run(grey, "color_controls(brightness=0.2)").1.pixel(x: 1, y: 1).red, 0.70))
        let light = try Fixture.solid(10, 10, [191, 191, 191])
        #expect(try Fixture.run(light, "color_controls(contrast=2)").1.pixel(x: 1, y: 1).red > 0.97)
        let red = try Fixture.solid(10, 10, [200, 40, 40])
        let desat = try Fixture.run(red, "color_controls(saturation=0)").1.pixel(x: 1, y: 1)
        #expect(near(desat.red, desat.green, 0.01) && near(desat.green, desat.blue, 0.01))
    }

    @Test func blackWhiteHasEqualChannels() throws {
        let photo = try SampleImages.photo(width: 80, height: 60, seed: 9, format: .png)
        let (_, bw) = try Fixture.run(photo, "black_white")
        for (x, y) in [(5, 5), (40, 30), (70, 50)] {
            let p = bw.pixel(x: x, y: y)
            #expect(near(p.red, p.green, 0.01) && near(p.green, p.blue, 0.01))
        }
    }

    @Test func blendModes() throws {
        let white = try Fixture.solid(10, 10, [255, 255, 255])
        let m = try Fixture.run(white, "blend(mode=multiply, background=#808080)").1.pixel(x: 1, y: 1)
        #expect(near(m.red, 0.5) && near(m.blue, 0.5))
        let half = try Fixture.run(white, "blend(alpha=0.5, background=black)").1.pixel(x: 1, y: 1)
        #expect(near(half.red, 0.5))
    }

    @Test func rotateFlipFlop() throws {
        let img = try Fixture.halves(200, 100, left: [255, 0, 0], right: [0, 0, 255])
        let (r, ri) = try Fixture.run(img, "rotate(90)")
        #expect((r.width, r.height) == (100, 200))
        #expect(ri.pixel(x: 50, y: 10).red > 0.9)  // the left half is now on top
        let (r45, r45i) = try Fixture.run(img, "rotate(45) |> format(png)")
        #expect(r45.width > 200 && r45i.pixel(x: 0, y: 0).alpha < 0.05)
        let (_, flopped) = try Fixture.run(img, "flop")
        #expect(flopped.pixel(x: 10, y: 50).blue > 0.9)
        let stacked = try Fixture.stacked(50, 100, top: [255, 0, 0], bottom: [0, 0, 255])
        let (_, flipped) = try Fixture.run(stacked, "flip")
        #expect(flipped.pixel(x: 25, y: 10).blue > 0.9)
    }

    @Test func gifAvifAndProgressiveOutputs() throws {
        let photo = try SampleImages.photo(width: 120, height: 80, seed: 4)
        let gif = try Fixture.run(photo, "format(gif)").0.data
        #expect(ImageFormat.sniff(gif) == .gif)
        let avif = try ImagePipeline.run(photo, format: .jpeg, chain: ProcessorChain.parse("format(avif, quality=50)")).data
        #expect([ImageFormat.avif, .heic].contains(ImageFormat.sniff(avif)))
        // The quality reaches the AVIF encoder: more of it, more bytes and a better score.
        let chains = try [20, 90].map { try ProcessorChain.parse("format(avif, quality=\($0))") }
        let avifs = try ImagePipeline.run(photo, format: .jpeg, chains: chains, scores: [true, true]).map { try $0.get() }
        #expect(avifs[0].data.count < avifs[1].data.count)
        #expect(try #require(avifs[0].score) + 5 < #require(avifs[1].score))
        let progressive = try ImagePipeline.run(photo, format: .jpeg, chain: ProcessorChain.parse("format(jpeg, progressive=true)")).data
        let baseline = try ImagePipeline.run(photo, format: .jpeg, chain: ProcessorChain.parse("format(jpeg)")).data
        #expect(containsMarker(progressive, 0xC2))  // SOF2: progressive DCT
        #expect(!containsMarker(baseline, 0xC2) && containsMarker(baseline, 0xC0))
    }

    func containsMarker(_ jpeg: Data, _ marker: UInt8) -> Bool {
        let b = [UInt8](jpeg)
        return (0..<(b.count - 1)).contains { b[$0] == 0xFF && b[$0 + 1] == marker }
    }
}

@Suite(.cpuHeavy) struct DecodePolicyTests {
    /// A JPEG with an EXIF APP1 segment that says orientation `value`.
    @Test func exifOrientation6ComesOutUpright() throws {
        let stored = try Fixture.halves(200, 100, left: [255, 0, 0], right: [0, 0, 255], format: .jpeg)
        let rotated = SampleImages.withEXIFOrientation(stored, 6)
        let (out, image) = try Fixture.run(rotated, "resize(100x100) |> format(png)")
        #expect((out.width, out.height) == (50, 100))  // 90° clockwise: portrait
        #expect(image.pixel(x: 25, y: 5).red > 0.8)  // the stored left (red) is now the top
        #expect(image.pixel(x: 25, y: 95).blue > 0.8)
        // The shrink hint is computed in stored orientation.
        let header = try MagickImage.ping(rotated, format: .jpeg)
        #expect(header.swapsAxes)
    }

    @Test func cmykComesOutSRGB() throws {
        let rgb = try Fixture.solid(40, 40, [200, 30, 30], format: .jpeg)
        let cmyk = try MagickImage.decode(rgb, format: .jpeg)
        #expect(cmyk.transform(to: CMYKColorspace))
        let cmykJPEG = try cmyk.encode()
        #expect(try MagickImage.decode(cmykJPEG, format: .jpeg).colorspace == CMYKColorspace)
        let (_, out) = try Fixture.run(cmykJPEG, "resize(20x20) |> format(jpeg)")
        #expect(out.colorspace == sRGBColorspace)
        let p = out.pixel(x: 10, y: 10)
        #expect(p.red > 0.6 && p.green < 0.3 && p.blue < 0.3)
    }

    @Test func animatedGIFKeepsItsFrames() throws {
        let gif = try SampleImages.animatedGIF(frames: 3)
        #expect(try MagickImage.decode(gif, format: .gif).frameCount == 3)
        let (out, image) = try Fixture.run(gif, "resize(30x30) |> format(gif)")
        #expect((out.width, out.height) == (30, 20))
        #expect(image.frameCount == 3)
        let (_, still) = try Fixture.run(gif, "resize(30x30) |> format(png)")
        #expect(still.frameCount == 1)
    }

    @Test func tooManyFramesIsTooLarge() throws {
        var limits = ImageLimits()
        limits.maxFrames = 2
        #expect { _ = try Fixture.run(try SampleImages.animatedGIF(frames: 3), "resize(10x10)", limits: limits) } throws: {
            ($0 as? HalcyonError)?.code == .imageTooLarge
        }
    }

    @Test func shrinkHintsComeFromTheFinalNeed() throws {
        func hint(_ chain: String, _ w: Int, _ h: Int, swaps: Bool = false) throws -> (Int, Int)? {
            try ProcessorChain.parse(chain).shrinkHint(for: MagickImage.Header(width: w, height: h, frames: 1, swapsAxes: swaps)).map {
                ($0.width, $0.height)
            }
        }
        #expect(try hint("resize(320x320, mode=fill)", 4032, 3024)! == (427, 320))
        #expect(try hint("resize(1024x1024)", 4032, 3024)! == (1024, 768))
        #expect(try hint("downsample(64x64) |> format(png)", 1920, 1080)! == (64, 36))
        #expect(try hint("resize(320x320, mode=fill) |> crop(100x100)", 1920, 1080)! == (569, 320))
        // Stored 3024×4032, shown 4032×3024: fill 100×400 needs 534×400 shown, so 400×534 stored.
        #expect(try hint("resize(100x400, mode=fill)", 3024, 4032, swaps: true)! == (400, 534))
        #expect(try hint("resize(5000x5000)", 1920, 1080) == nil)  // enlarging: decode everything
        #expect(try hint("blur(2) |> resize(100x100)", 1920, 1080) == nil)
        #expect(try hint("format(png)", 1920, 1080) == nil)
    }
}

@Suite(.cpuHeavy) struct SharedDecodeTests {
    @Test func severalChainsShareOneDecode() throws {
        let big = try SampleImages.photo(width: 2400, height: 1600, seed: 21)
        let chains = try [
            "resize(320x320, mode=fill) |> format(jpeg, quality=82)", "resize(1024x1024) |> format(webp, quality=80)",
            "resize(64x64, mode=fill) |> format(png)",
        ].map { try ProcessorChain.parse($0) }
        let counter = ImagePipeline.DecodeCounter()
        let results = try ImagePipeline.$observer.withValue(counter) { try ImagePipeline.run(big, format: .jpeg, chains: chains) }
        #expect(counter.count == 1)
        let outs = try results.map { try $0.get() }
        #expect(outs.map { "\($0.width)x\($0.height)" } == ["320x320", "1024x683", "64x64"])
        #expect(outs.map(\.format) == [.jpeg, .webp, .png])
        #expect(outs.map { ImageFormat.sniff($0.data) } == [.jpeg, .webp, .png])
    }

    @Test func theSharedDecodeIsLargeEnoughForEveryChain() throws {
        // A 2400×1600 image of fine stripes: decoding at the 64×64 chain's hint would blur
        // them away for the 1024 chain. Each output must match what the chain gets alone.
        let big = try SampleImages.photo(width: 2400, height: 1600, seed: 22)
        let small = try ProcessorChain.parse("resize(64x64, mode=fill) |> format(png)")
        let large = try ProcessorChain.parse("resize(1024x1024) |> format(png)")
        let together = try ImagePipeline.run(big, format: .jpeg, chains: [small, large]).map { try $0.get() }
        let alone = try ImagePipeline.run(big, format: .jpeg, chain: large)
        #expect(together[1].data == alone.data)
    }

    @Test func aFailingChainFailsOnlyItself() throws {
        let img = try SampleImages.photo(width: 100, height: 100, seed: 3, format: .png)
        var limits = ImageLimits()
        limits.maxWidth = 100
        let results = try ImagePipeline.run(
            img, format: .png,
            chains: [
                ProcessorChain.parse("resize(10x10)"), ProcessorChain.parse("rotate(45) |> format(png)"),
            ], limits: limits)
        #expect((try? results[0].get())?.width == 10)
        // The 45° rotation would be 143 px wide: over the width limit, so it fails, alone.
        #expect { try results[1].get() } throws: { ($0 as? HalcyonError)?.code == .imageTooLarge && "\($0)".contains("step 1, rotate(45)") }
    }
}
