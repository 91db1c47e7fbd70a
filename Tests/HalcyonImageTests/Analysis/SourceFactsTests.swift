import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

@Suite struct SourceFactsTests {
    static let photo: Data = try! SampleImages.photo(width: 400, height: 300, seed: 11)

    func facts(_ data: Data, _ format: ImageFormat, direct: Bool? = nil) throws -> SourceFacts {
        let out = try ImagePipeline.run(data, format: format, chains: [ProcessorChain.parse("resize(64x64)")], directLane: direct)[0].get()
        return try #require(out.source)
    }

    @Test(arguments: [true, false])
    func exifFieldsAreReadInEitherByteOrder(bigEndian: Bool) throws {
        var exif = SampleEXIF()
        exif.bigEndian = bigEndian
        let fields = try #require(ExifReader(exif.block())).read()
        #expect(fields.make == "Halcyon Camera Co.")
        #expect(fields.model == "HX-1")
        #expect(fields.orientation == 1)
        #expect(fields.capturedAt == "2024-05-01T12:30:45")
        #expect(fields.hasGPS)
        let position = try #require(fields.position)
        #expect(abs(position.latitude - (48 + 51.0 / 60 + 24.0 / 3600)) < 1e-9)
        #expect(abs(position.longitude - (2 + 21.0 / 60 + 3.0 / 3600)) < 1e-9)
    }

    @Test func southAndWestAreNegative() throws {
        var exif = SampleEXIF()
        exif.gps = ((33, 52, 4), "S", (151, 12, 26), "W")
        let p = try #require(ExifReader(exif.block())?.read().position)
        #expect(p.latitude < -33 && p.longitude < -151)
    }

    /// Both lanes see the same facts; the size is the displayed one at full resolution.
    @Test(arguments: [true, false])
    func aJPEGsFactsComeFromItsHeaderAndEXIF(direct: Bool) throws {
        let jpeg = SampleEXIF().inserted(into: Self.photo)
        let f = try facts(jpeg, .jpeg, direct: direct)
        #expect((f.width, f.height, f.format, f.bytes) == (400, 300, .jpeg, jpeg.count))
        #expect(f.cameraMake == "Halcyon Camera Co." && f.cameraModel == "HX-1")
        #expect(f.capturedAt == "2024-05-01T12:30:45")
        #expect(f.hasGPS && f.position != nil)
        #expect(!f.hasAlpha && f.frames == 1 && f.orientation == 1 && f.profile == nil)
    }

    @Test func aRotatedSourceReportsItsDisplayedSize() throws {
        var exif = SampleEXIF()
        exif.orientation = 6
        exif.gps = nil
        let f = try facts(exif.inserted(into: Self.photo), .jpeg)
        #expect((f.width, f.height, f.orientation) == (300, 400, 6))
        #expect(!f.hasGPS && f.position == nil)
        #expect(f.meta["has_gps"] == nil && f.meta["gps"] == nil)
    }

    @Test func alphaFramesAndProfileAreReported() throws {
        let png = try SampleImages.photo(width: 50, height: 40, seed: 2, format: .png, alpha: true)
        #expect(try facts(png, .png).hasAlpha)
        let gif = try SampleImages.animatedGIF(frames: 5)
        let g = try facts(gif, .gif)
        #expect((g.frames, g.format) == (5, .gif))
        let profiled = try ColourProfileTests.solid([200, 30, 30], profile: ColourProfileTests.linear)
        #expect(try facts(profiled, .png).profile == "Linear RGB (test)")
        let plain = try facts(Self.photo, .jpeg)
        #expect(plain.cameraMake == nil && plain.capturedAt == nil && plain.meta["camera_make"] == nil)
    }

    @Test func metaDropsThePositionUnlessKept() throws {
        let f = try facts(SampleEXIF().inserted(into: Self.photo), .jpeg)
        #expect(f.meta["gps"]?["latitude"] != nil)
        #expect(f.withoutPosition.meta["gps"] == nil)
        #expect(f.withoutPosition.meta["has_gps"] == .bool(true))
        #expect(JSONValue.parse(SourceRecord(f).metaJSON) == f.meta)
    }

    @Test func unsetOrJunkDatesAreLeftOut() {
        #expect(ExifReader.isoDate("0000:00:00 00:00:00") == nil)
        #expect(ExifReader.isoDate("    :  :     :  :  ") == nil)
        #expect(ExifReader.isoDate("2024:13") == nil)
        #expect(ExifReader.isoDate("2023:12:31 23:59:59") == "2023-12-31T23:59:59")
    }

    /// Hostile EXIF (offsets past the end, huge counts, loops, truncation) is read without a
    /// crash and yields at most what is really there; the image still processes.
    @Test func mangledEXIFNeverBreaksAJob() throws {
        var random = FuzzRandom.fromEnvironment()
        let clean = SampleEXIF().block()
        for _ in 0..<FuzzRandom.iterations(default: 2000) {
            var b = clean
            for _ in 0..<(1 + random.below(6)) {
                switch random.below(3) {
                case 0: b[random.below(b.count)] = UInt8(random.below(256))
                case 1: b = Array(b.prefix(random.below(b.count + 1)))
                default: if b.count > 12 { b[8 + random.below(4)] = 0xFF }
                }
                if b.isEmpty { break }
            }
            _ = ExifReader(b)?.read()
        }
        // An IFD that points at itself, and one whose entry count runs past the block.
        let loop: [UInt8] = [0x4D, 0x4D, 0, 42, 0, 0, 0, 8, 0, 1, 0x87, 0x69, 0, 4, 0, 0, 0, 1, 0, 0, 0, 8, 0, 0, 0, 0]
        #expect(ExifReader(loop)?.read() == ExifReader.Fields())
        let long: [UInt8] = [0x49, 0x49, 42, 0, 8, 0, 0, 0, 0xFF, 0xFF]
        #expect(ExifReader(long)?.read() == ExifReader.Fields())
        var broken = SampleEXIF().inserted(into: Self.photo)
        broken[30] ^= 0xFF
        #expect(try facts(broken, .jpeg).width == 400, "seed \(random.seed)")
    }
}
