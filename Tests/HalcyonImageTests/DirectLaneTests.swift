internal import CImageCodecs
internal import CMagickWand
import Foundation
import HalcyonDomain
import HalcyonQualityReference
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// The direct lane (libjpeg-turbo/libpng decode, 8-bit resize, libjpeg-turbo encode) against
/// the ImageMagick lane on the same sources: the same sizes and formats, and outputs as close to
/// the exact reference (`QualityReference`) as ImageMagick's.
@Suite(.cpuHeavy) struct DirectLaneTests {
    static let fill = try! ProcessorChain.parse("resize(320x320, mode=fill) |> format(jpeg, quality=82)")

    func both(_ data: Data, _ format: ImageFormat, _ chains: [ProcessorChain]) throws -> (direct: [ProcessedImage], magick: [ProcessedImage]) {
        let d = try ImagePipeline.run(data, format: format, chains: chains, directLane: true).map { try $0.get() }
        let m = try ImagePipeline.run(data, format: format, chains: chains, directLane: false).map { try $0.get() }
        return (d, m)
    }

    /// The bench corpus's kinds (the large JPEG smaller, and 4:4:4 as a q ≥ 90 JPEG from ImageMagick is).
    @Test(arguments: [
        (1920, 1080, ImageFormat.jpeg, 85, false), (3024, 2016, .jpeg, 92, false), (1200, 800, .png, 95, true), (640, 480, .png, 95, false),
    ])
    func fillIsAsCloseToTheReferenceAsImageMagicks(width: Int, height: Int, format: ImageFormat, quality: Int, alpha: Bool) throws {
        let source = try SampleImages.photo(width: width, height: height, seed: 5, format: format, quality: quality, alpha: alpha)
        #expect(DirectLane.source(source, format: format) != nil)
        let reference = try QualityReference.fill(source, format: format, width: 320, height: 320)
        let (d, m) = try both(source, format, [Self.fill])
        #expect((d[0].width, d[0].height, d[0].format) == (320, 320, .jpeg))
        let direct = try #require(QualityReference.psnr(d[0].data, format: .jpeg, against: reference))
        let magick = try #require(QualityReference.psnr(m[0].data, format: .jpeg, against: reference))
        print("direct lane \(width)x\(height) \(format): \(direct) dB, ImageMagick lane \(magick) dB; bytes \(d[0].data.count) vs \(m[0].data.count)")
        #expect(direct > magick - 0.1, "direct \(direct) dB, ImageMagick \(magick) dB")
    }
}

extension DirectLaneTests {
    /// `image` re-encoded by ImageMagick after `edit`.
    static func reencode(_ data: Data, _ format: ImageFormat, as out: String, _ edit: (OpaquePointer) -> Void) throws -> Data {
        let image = try MagickImage.decode(data, format: format)
        edit(image.wand)
        MagickSetFormat(image.wand, out)
        MagickSetImageFormat(image.wand, out)
        var length = 0
        let blob = try #require(MagickGetImageBlob(image.wand, &length))
        defer { MagickRelinquishMemory(blob) }
        return Data(bytes: blob, count: length)
    }

    /// `png` with a chunk inserted after IHDR (CRC computed).
    static func inserting(_ type: String, _ payload: [UInt8], into png: Data) -> Data {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in Array(type.utf8) + payload {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        crc ^= 0xFFFF_FFFF
        func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        let chunk = be32(UInt32(payload.count)) + Array(type.utf8) + payload + be32(crc)
        return png.prefix(33) + Data(chunk) + png.dropFirst(33)
    }

    @Test func sourcesItWouldDecodeDifferentlyGoToImageMagick() throws {
        let jpeg = try SampleImages.photo(width: 96, height: 64, seed: 1)
        let png = try SampleImages.photo(width: 96, height: 64, seed: 1, format: .png)
        #expect(DirectLane.source(jpeg, format: .jpeg) != nil)
        #expect(DirectLane.source(png, format: .png)?.channels == 3)
        // A rotation to apply, a profile to convert from, CMYK.
        #expect(DirectLane.source(SampleImages.withEXIFOrientation(jpeg, 6), format: .jpeg) == nil)
        #expect(DirectLane.source(SampleImages.withEXIFOrientation(jpeg, 1), format: .jpeg) != nil)
        // An EXIF block too broken to read (no TIFF header): it might still rotate for ImageMagick.
        let garbage: [UInt8] = Array("Exif\0\0".utf8) + [0x4D, 0x4D, 0x00, 0x2B, 0, 0, 0, 8]
        let broken = jpeg.prefix(2) + Data([0xFF, 0xE1, 0, UInt8(garbage.count + 2)] + garbage) + jpeg.dropFirst(2)
        #expect(DirectLane.source(broken, format: .jpeg) == nil)
        let icc = try ColourProfileTests.solid([128, 64, 200], profile: ColourProfileTests.linear, format: "JPEG")
        #expect(DirectLane.source(icc, format: .jpeg) == nil)
        let cmyk = try Self.reencode(jpeg, .jpeg, as: "JPEG") { _ = MagickTransformImageColorspace($0, CMYKColorspace) }
        #expect(DirectLane.source(cmyk, format: .jpeg) == nil)
        // 16-bit samples, a gamma other than sRGB's; a transparent colour makes it RGBA.
        let deep = try Self.reencode(png, .png, as: "PNG48") { _ = MagickSetImageDepth($0, 16) }
        #expect(DirectLane.source(deep, format: .png) == nil)
        #expect(DirectLane.source(Self.inserting("gAMA", [0, 1, 0x86, 0xA0], into: png), format: .png) == nil)  // 1.0
        #expect(DirectLane.source(Self.inserting("gAMA", [0, 0, 0xB1, 0x8F], into: png), format: .png) != nil)  // 1/2.2
        #expect(DirectLane.source(Self.inserting("tRNS", [0, 0, 0, 0, 0, 0], into: png), format: .png)?.channels == 4)
        // Steps the lane lacks send the whole source to ImageMagick.
        #expect(!DirectLane.accepts(try ProcessorChain.parse("resize(320x320) |> blur(2)")))
        #expect(!DirectLane.accepts(try ProcessorChain.parse("resize(320x320) |> format(gif)")))
        #expect(DirectLane.accepts(Self.fill))
    }

    /// A JPEG's 8-bit quantization tables by number (DQT segments up to the first scan), in the
    /// order the file stores them.
    static func quantizationTables(_ jpeg: Data) -> [Int: [Int]] {
        let b = [UInt8](jpeg)
        var tables: [Int: [Int]] = [:], i = 2
        while i + 4 <= b.count, b[i] == 0xFF, b[i + 1] != 0xDA {
            let length = Int(b[i + 2]) << 8 | Int(b[i + 3])
            if b[i + 1] == 0xDB {
                var j = i + 4
                while j + 65 <= i + 2 + length {
                    tables[Int(b[j] & 0x0F)] = b[(j + 1)..<(j + 65)].map(Int.init)
                    j += 65
                }
            }
            i += 2 + length
        }
        return tables
    }

    /// The lane's JPEG writer at half qualities: a whole quality's tables are exactly what
    /// libjpeg's `jpeg_set_quality` gives (ImageMagick's writer, the reference), a half quality's
    /// are libjpeg's standard tables at the scale between (82.5: 35 %), entry by entry between
    /// the two whole qualities', and its bytes and score fall between theirs.
    @Test func halfQualitiesAreLibjpegsScaleBetweenTwoQualities() throws {
        let photo = try SampleImages.photo(width: 480, height: 320, seed: 7, quality: 95)
        let source = try #require(DirectLane.source(photo, format: .jpeg))
        let pixels = try #require(DirectLane.decode(photo, source, hint: nil))
        let magick = try MagickImage.decode(photo, format: .jpeg)
        magick.outputFormat = .jpeg
        magick.chroma = .full
        func ours(_ q: Int, half: Bool = false) throws -> Data { try pixels.encodeJPEG(quality: q, half: half, progressive: false, sampling: (1, 1)) }
        for q in [40, 82, 83, 97] {
            magick.outputQuality = q
            #expect(Self.quantizationTables(try ours(q)) == Self.quantizationTables(try magick.encode()), "quality \(q)")
        }
        // libjpeg's standard luminance table (natural order) at a scale, as jpeg_add_quant_table makes it.
        let luma = [
            16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22, 29, 51, 87, 80, 62,
            18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92, 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112,
            100, 103, 99,
        ]
        func scaled(_ scale: Int) -> [Int] { luma.map { min(max(($0 * scale + 50) / 100, 1), 255) }.sorted() }
        #expect(hc_jpeg_scale(164) == 36 && hc_jpeg_scale(165) == 35 && hc_jpeg_scale(81) == 123 && hc_jpeg_scale(0) == 5000)
        let reference = try SSIMULACRA2Reference(pixels)
        for (q, scale) in [(82, 35), (40, 123)] {
            let low = try ours(q), half = try ours(q, half: true), high = try ours(q + 1)
            let (l, h, u) = (Self.quantizationTables(low), Self.quantizationTables(half), Self.quantizationTables(high))
            #expect(h[0].map { $0.sorted() } == scaled(scale), "quality \(q).5: scale \(scale) %")
            for t in [0, 1] {
                let (a, b, c) = (try #require(l[t]), try #require(h[t]), try #require(u[t]))
                #expect(zip(zip(a, b), c).allSatisfy { $0.0 >= $0.1 && $0.1 >= $1 } && b != a && b != c, "table \(t) at \(q).5")
            }
            #expect(low.count < half.count && half.count < high.count, "\(q): \(low.count) < \(half.count) < \(high.count) bytes")
            let scores = try [low, half, high].map { try reference.score(encoded: $0, format: .jpeg) }
            #expect(scores[0] < scores[1] && scores[1] < scores[2], "\(q): \(scores)")
        }
    }

    @Test func greyProgressiveAndSubsampledSourcesMatchImageMagick() throws {
        let photo = try SampleImages.photo(width: 900, height: 600, seed: 3, quality: 92)
        let grey = try Self.reencode(photo, .jpeg, as: "JPEG") { _ = MagickTransformImageColorspace($0, GRAYColorspace) }
        let progressive = try Self.reencode(photo, .jpeg, as: "JPEG") { _ = MagickSetImageInterlaceScheme($0, PlaneInterlace) }
        let chain = try ProcessorChain.parse("resize(300x300, mode=fit) |> format(jpeg, quality=90)")
        for (name, source) in [("grey", grey), ("progressive", progressive), ("4:4:4", photo)] {
            #expect(DirectLane.source(source, format: .jpeg) != nil, "\(name)")
            let (d, m) = try both(source, .jpeg, [chain])
            #expect((d[0].width, d[0].height) == (m[0].width, m[0].height), "\(name)")
            let a = try MagickImage.decode(d[0].data, format: .jpeg), b = try MagickImage.decode(m[0].data, format: .jpeg)
            let db = QualityReference.psnr(ResamplerTests.samples(a), ResamplerTests.samples(b))
            #expect(db > 40, "\(name): \(db) dB between the lanes")
            print("direct lane \(name): \(db) dB between the lanes; bytes \(d[0].data.count) vs \(m[0].data.count)")
            // Same chroma sampling as ImageMagick writes: sizes within a few per cent. A grey
            // source's output is a three-component JPEG here (its chroma flat), one component
            // from ImageMagick: 5–6 % more bytes for that alone.
            let bound = name == "grey" ? 0.08 : 0.03
            #expect(
                abs(Double(d[0].data.count) / Double(m[0].data.count) - 1) < bound, "\(name): \(d[0].data.count) vs \(m[0].data.count) bytes")
        }
    }

    /// The lane's WebP writer (libwebp directly) against ImageMagick's for the same 8-bit pixels:
    /// the same bytes, for RGB and RGBA, lossy qualities and lossless at 100.
    /// (Opaque lossy pictures go to libwebp as RGB, the others as ARGB, as ImageMagick's; odd
    /// sides, where the chroma planes round up.)
    @Test(arguments: [(false, 80, 301), (false, 30, 301), (false, 80, 257), (true, 80, 301), (true, 80, 257), (true, 100, 301), (false, 100, 301)])
    func webPIsByteForByteImageMagicksWebP(alpha: Bool, quality: Int, width: Int) throws {
        let png = try SampleImages.photo(width: width, height: width == 257 ? 171 : 200, seed: 8, format: .png, alpha: alpha)
        let source = try #require(DirectLane.source(png, format: .png))
        let pixels = try #require(DirectLane.decode(png, source, hint: nil))
        #expect(pixels.channels == (alpha ? 4 : 3))
        let direct = try pixels.encodeWebP(quality: quality)
        let image = try pixels.magickImage(format: .webp)
        image.outputQuality = quality
        let magick = try image.encode()
        #expect(direct.count > 100 && direct.prefix(4) == Data("RIFF".utf8))
        #expect(direct == magick, "\(direct.count) bytes against ImageMagick's \(magick.count)")
    }

    /// Wider than WebP allows: the same code from the lane's writer as from ImageMagick's.
    @Test func aWebPTooWideFailsAsImageMagicksDoes() throws {
        let wide = PixelBuffer(width: 16384, height: 2, channels: 3)
        wide.bytes.update(repeating: 90, count: 16384 * 2 * 3)
        let direct = Result { () throws(HalcyonError) in try wide.encodeWebP(quality: 80) }
        let image = try wide.magickImage(format: .webp)
        let magick = Result { () throws(HalcyonError) in try image.encode() }
        guard case .failure(let d) = direct, case .failure(let m) = magick else {
            Issue.record("a 16384-pixel-wide WebP was written")
            return
        }
        #expect(d.code == .imageTooLarge && m.code == .imageTooLarge, "direct \(d), ImageMagick \(m)")
    }

    /// Flattening onto white (vectorized C) against its formula, for every colour and alpha.
    @Test func flatteningGivesEveryColourAndAlphaItsRoundedComposite() {
        let pixels = PixelBuffer(width: 256, height: 256, channels: 4)
        for a in 0..<256 {
            for c in 0..<256 {
                let p = pixels.bytes + (a * 256 + c) * 4
                (p[0], p[1], p[2], p[3]) = (UInt8(c), UInt8(255 - c), UInt8(c / 2), UInt8(a))
            }
        }
        let rgb = pixels.flattenedOnWhite()
        var wrong = 0
        for i in 0..<(256 * 256) {
            let a = Double(pixels.bytes[i * 4 + 3]) / 255
            for k in 0..<3 {
                let exact = Double(pixels.bytes[i * 4 + k]) * a + 255 * (1 - a)
                if abs(Double(rgb.bytes[i * 3 + k]) - exact) > 0.5 + 1e-9 { wrong += 1 }
            }
        }
        #expect(rgb.channels == 3 && wrong == 0, "\(wrong) samples not the rounded composite")
    }

    @Test func otherOutputsAreEncodedByImageMagickFromTheSharedDecode() throws {
        let chains = try [
            "resize(320x320, mode=fill) |> format(jpeg, quality=82)", "resize(200x200, mode=fit) |> format(webp, quality=80)",
            "resize(64x64, mode=fill) |> format(png)", "downsample(100x100)",
        ].map { try ProcessorChain.parse($0) }
        let source = try SampleImages.photo(width: 600, height: 400, seed: 4, format: .png, alpha: true)
        let (d, m) = try both(source, .png, chains)
        #expect(d.map(\.format) == [.jpeg, .webp, .png, .png])
        #expect(d.map(\.format) == m.map(\.format))
        #expect(d.map { "\($0.width)x\($0.height)" } == ["320x320", "200x133", "64x64", "100x67"])
        #expect(d.map { "\($0.width)x\($0.height)" } == m.map { "\($0.width)x\($0.height)" })
        for (i, (a, b)) in zip(d, m).enumerated() {
            let x = try MagickImage.decode(a.data, format: a.format), y = try MagickImage.decode(b.data, format: b.format)
            #expect(x.hasAlpha == y.hasAlpha, "chain \(i)")
            let db = QualityReference.psnr(ResamplerTests.samples(x, alpha: x.hasAlpha), ResamplerTests.samples(y, alpha: y.hasAlpha))
            #expect(db > 38, "chain \(i): \(db) dB between the lanes")
            #expect(Double(a.data.count) < Double(b.data.count) * 1.1, "chain \(i): \(a.data.count) vs \(b.data.count) bytes (8-bit PNGs)")
        }
    }

    @Test func aDecodeTheLaneCannotFinishFailsAsImageMagicksDoes() throws {
        var broken = try SampleImages.photo(width: 300, height: 200, seed: 9)
        // Scan data replaced by a marker libjpeg refuses (a second SOI) just after the SOS header.
        let sos = try #require(broken.firstRange(of: Data([0xFF, 0xDA])))
        broken.replaceSubrange((sos.lowerBound + 20)..<(sos.lowerBound + 24), with: Data([0xFF, 0xD8, 0xFF, 0xD8]))
        let direct = Result { () throws(HalcyonError) in try ImagePipeline.run(broken, format: .jpeg, chains: [Self.fill], directLane: true)[0].get()
        }
        let magick = Result { () throws(HalcyonError) in try ImagePipeline.run(broken, format: .jpeg, chains: [Self.fill], directLane: false)[0].get()
        }
        switch (direct, magick) {
        case (.failure(let a), .failure(let b)): #expect(a.code == b.code)
        case (.success(let a), .success(let b)): #expect(a.width == b.width)
        default: Issue.record("the lanes disagree: \(direct) against \(magick)")
        }
    }
}
