import Foundation
import HalcyonDomain
import HalcyonImage
import HalcyonSamples
import HalcyonTestSupport
import Testing

@Suite(.cpuHeavy) struct PipelineTests {
    static let photo: Data = try! SampleImages.photo(width: 640, height: 360, seed: 7)

    func run(_ data: Data, _ format: ImageFormat, _ chain: String) throws -> ProcessedImage {
        try ImagePipeline.run(data, format: format, chain: ProcessorChain.parse(chain))
    }

    @Test func fillGivesExactlyTheSize() throws {
        let out = try run(Self.photo, .jpeg, "resize(200x200, mode=fill)")
        #expect((out.width, out.height) == (200, 200))
        let back = try MagickImage.decode(out.data, format: .jpeg)
        #expect((back.width, back.height) == (200, 200))
    }

    @Test func fitKeepsTheAspectRatioInside() throws {
        let out = try run(Self.photo, .jpeg, "resize(200x200, mode=fit)")
        #expect(out.width == 200)
        #expect(out.height == 113)  // 360 × 200/640 = 112.5
    }

    @Test func stretchIgnoresTheAspectRatio() throws {
        let out = try run(Self.photo, .jpeg, "resize(100x300, mode=stretch)")
        #expect((out.width, out.height) == (100, 300))
    }

    @Test(arguments: [
        ("format(jpeg, quality=80)", ImageFormat.jpeg, [UInt8]([0xFF, 0xD8, 0xFF])),
        ("format(png)", .png, [0x89, 0x50, 0x4E, 0x47]),
        ("format(webp, quality=70)", .webp, Array("RIFF".utf8)),
    ])
    func outputBytesStartWithTheFormatsMagic(chain: String, format: ImageFormat, magic: [UInt8]) throws {
        let out = try run(Self.photo, .jpeg, "resize(64x64) |> " + chain)
        #expect(out.format == format)
        #expect(Array(out.data.prefix(magic.count)) == magic)
        #expect(ImageFormat.sniff(out.data) == format)
    }

    @Test func noFormatStepKeepsTheSourceFormat() throws {
        let png = try SampleImages.photo(width: 300, height: 200, seed: 3, format: .png)
        let out = try run(png, .png, "resize(100x100)")
        #expect(ImageFormat.sniff(out.data) == .png)
        let jpeg = try run(Self.photo, .jpeg, "resize(100x100)")
        #expect(ImageFormat.sniff(jpeg.data) == .jpeg)
    }

    @Test func alphaSurvivesToPNGAndIsFlattenedForJPEG() throws {
        // The sample's alpha ramps from transparent (left) to opaque (right).
        let png = try SampleImages.photo(width: 400, height: 200, seed: 5, format: .png, alpha: true)
        let out = try run(png, .png, "resize(200x100) |> format(png)")
        let back = try MagickImage.decode(out.data, format: .png)
        #expect(back.pixel(x: 0, y: 50).alpha < 0.1)
        #expect(back.pixel(x: 199, y: 50).alpha > 0.9)

        let jpeg = try run(png, .png, "resize(200x100) |> format(jpeg)")
        let flat = try MagickImage.decode(jpeg.data, format: .jpeg)
        let left = flat.pixel(x: 0, y: 50)
        #expect(left.red > 0.9 && left.green > 0.9 && left.blue > 0.9)  // transparent → white
    }

    @Test func shrinkOnLoadKeepsEnoughPixels() throws {
        let big = try SampleImages.photo(width: 2400, height: 1600, seed: 11)
        let out = try run(big, .jpeg, "resize(320x320, mode=fill) |> format(jpeg, quality=82)")
        #expect((out.width, out.height) == (320, 320))
        let fit = try run(big, .jpeg, "resize(1000x1000)")
        #expect((fit.width, fit.height) == (1000, 667))
    }

    @Test func solidColourSurvivesResize() throws {
        let red = try SampleImages.solid(width: 50, height: 50, red: 255, green: 0, blue: 0)
        let out = try run(red, .png, "resize(10x10)")
        let px = try MagickImage.decode(out.data, format: .png).pixel(x: 5, y: 5)
        #expect(px.red > 0.95 && px.green < 0.05 && px.blue < 0.05)
    }

    @Test(arguments: [
        (Data(), ImageFormat.jpeg),
        (Data([0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10]), .jpeg),
        (Data("<svg xmlns='http://www.w3.org/2000/svg'/>".utf8), .png),
    ])
    func undecodableInputFailsWithDecodeFailed(data: Data, format: ImageFormat) {
        #expect {
            _ = try run(data, format, "resize(10x10)")
        } throws: { ($0 as? HalcyonError)?.code == .decodeFailed }
    }

    @Test func truncatedJPEGFailsCleanly() throws {
        let half = Self.photo.prefix(Self.photo.count / 3)
        do {
            let out = try run(Data(half), .jpeg, "resize(10x10)")
            // libjpeg may recover a partial image; if it does, the result is still a valid image.
            #expect(ImageFormat.sniff(out.data) == .jpeg)
        } catch let e as HalcyonError {
            #expect(e.code == .decodeFailed)
        }
    }

    @Test func hugeDeclaredDimensionsAreRefusedFromTheHeader() throws {
        // A PNG header claiming 100000×100000 (the pixel data is never reached).
        var png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13]) + Data("IHDR".utf8)
        let ihdr: [UInt8] = [0x00, 0x01, 0x86, 0xA0, 0x00, 0x01, 0x86, 0xA0, 8, 2, 0, 0, 0]
        png.append(contentsOf: ihdr)
        png.append(contentsOf: crc32(Array("IHDR".utf8) + ihdr).bigEndianBytes)
        // Refused from the header: nothing decoded (not "quickly", which a loaded machine stretches).
        let counter = ImagePipeline.DecodeCounter()
        ImagePipeline.$observer.withValue(counter) {
            #expect {
                _ = try run(png, .png, "resize(10x10)")
            } throws: { error in
                let code = (error as? HalcyonError)?.code
                return code == .imageTooLarge || code == .decodeFailed
            }
        }
        #expect(counter.count == 0, "the pixels were decoded")
    }
}

private func crc32(_ bytes: [UInt8]) -> UInt32 {
    var c: UInt32 = 0xFFFF_FFFF
    for b in bytes {
        c ^= UInt32(b)
        for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
    }
    return ~c
}

private extension UInt32 {
    var bigEndianBytes: [UInt8] { [UInt8(self >> 24), UInt8((self >> 16) & 0xFF), UInt8((self >> 8) & 0xFF), UInt8(self & 0xFF)] }
}

/// Damaged data is refused, not stored half grey; oversized headers never reach a coder.
@Suite(.cpuHeavy) struct DamagedInputTests {
    @Test(arguments: [ImageFormat.jpeg, .png])
    func aTruncatedImageIsADecodeFailure(format: ImageFormat) throws {
        let whole = try SampleImages.photo(width: 640, height: 480, seed: 3, format: format)
        let chain = try ProcessorChain.parse("resize(64x64) |> format(png)")
        _ = try ImagePipeline.run(whole, format: format, chain: chain)
        #expect {
            _ = try ImagePipeline.run(whole.prefix(whole.count * 2 / 5), format: format, chain: chain)
        } throws: { ($0 as? HalcyonError)?.code == .decodeFailed }
    }

    @Test func declaredDimensionsAreCheckedBeforeDecoding() throws {
        // A PNG header declaring 100000×100000 (the IHDR CRC is not even right: never read).
        var png = try SampleImages.solid(width: 4, height: 4, red: 1, green: 2, blue: 3)
        png.replaceSubrange(16..<24, with: [0, 1, 0x86, 0xA0, 0, 1, 0x86, 0xA0])
        #expect {
            _ = try ImagePipeline.run(png, format: .png, chain: try ProcessorChain.parse("format(png)"))
        } throws: { ($0 as? HalcyonError)?.code == .imageTooLarge && "\($0)".contains("100000x100000") }
    }
}
