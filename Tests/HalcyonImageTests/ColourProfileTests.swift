internal import CMagickWand
import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// Embedded ICC profiles are applied on the way to sRGB.
@Suite(.cpuHeavy) struct ColourProfileTests {
    /// A 40×40 PNG of one colour carrying `profile` (not applied: just attached). Not grey:
    /// libpng refuses an RGB profile on a greyscale PNG.
    static func solid(_ rgb: [UInt8], profile: Data, format: String = "PNG") throws -> Data {
        let image = try MagickImage.decode(try Fixture.solid(40, 40, rgb), format: .png)
        profile.withUnsafeBytes { _ = MagickSetImageProfile(image.wand, "icc", $0.baseAddress, $0.count) }
        MagickSetFormat(image.wand, format)  // the wand-level format (PNG, from decoding) would win
        MagickSetImageFormat(image.wand, format)
        MagickSetImageCompressionQuality(image.wand, 100)
        var length = 0
        let blob = try #require(MagickGetImageBlob(image.wand, &length))
        defer { MagickRelinquishMemory(blob) }
        return Data(bytes: blob, count: length)
    }

    static let linear = ICCProfile.rgb(
        description: "Linear RGB (test)", red: (0.4360747, 0.2225045, 0.0139322),
        green: (0.3850649, 0.7168786, 0.0971045), blue: (0.1430804, 0.0606169, 0.7141733)
    ) { $0 }

    @Test func ourSRGBProfileDescribesItself() {
        #expect(ICCProfile.description(of: ICCProfile.sRGB) == "sRGB IEC61966-2.1 (Halcyon)")
        #expect(ICCProfile.description(of: Data([1, 2, 3])) == nil)
    }

    /// Many profiles count padding NULs into their ASCII description (image-webp's tiny.webp:
    /// "sRGB-elle-V2-srgbtrc.icc" and four NULs). The description stops at the first one, and
    /// `source_meta` never carries a NUL: jsonb refuses `\u0000`, and the worker could not record
    /// the job's success (`worker.outcome_rejected`).
    @Test func aDescriptionStopsAtItsFirstNUL() throws {
        var padded = ICCProfile.sRGB
        // The first tag is `desc`: its offset is at 136; the text's count at offset + 8.
        let offset = padded[136..<140].reduce(0) { $0 << 8 | Int($1) }
        let count = padded[(offset + 8)..<(offset + 12)].reduce(0) { $0 << 8 | Int($1) }
        #expect(padded[(offset + 12 + count)..<(offset + 12 + count + 3)].allSatisfy { $0 == 0 })
        padded[offset + 11] = UInt8(count + 3)  // the next bytes are zeros: three more NULs
        #expect(ICCProfile.description(of: padded) == "sRGB IEC61966-2.1 (Halcyon)")

        var facts = SourceFacts(width: 1, height: 1, format: .png, bytes: 1)
        facts.profile = "a\u{0}b"
        facts.cameraModel = "\u{0}"
        #expect(!facts.meta.jsonText.contains("\\u0000"), "\(facts.meta.jsonText)")
    }

    @Test func aLinearLightProfileIsConvertedToSRGB() throws {
        let png = try Self.solid([128, 64, 200], profile: Self.linear)
        #expect(try MagickImage.decode(png, format: .png).embeddedProfile() != nil)
        let (_, out) = try Fixture.run(png, "resize(20x20) |> format(png)")
        // In sRGB's curve, linear 128, 64 and 200 (of 255) are 188, 137 and 229.
        let p = out.pixel(x: 10, y: 10)
        let got = [p.red, p.green, p.blue].map { $0 * 255 }
        #expect(zip(got, [188.0, 137, 229]).allSatisfy { abs($0 - $1) < 3 }, "got \(got)")
    }

    @Test func anSRGBProfileLeavesThePixelsAlone() throws {
        let (_, out) = try Fixture.run(try Self.solid([128, 64, 200], profile: ICCProfile.sRGB), "resize(20x20) |> format(png)")
        #expect(abs(out.pixel(x: 10, y: 10).green * 255 - 64) < 1.5)
    }

    @Test func aBrokenProfileIsDroppedNotFatal() throws {
        // A well-formed header and tag table whose curve tag has an unknown type.
        var junk = Self.linear
        let curv = try #require(junk.range(of: Data("curv".utf8)))
        junk.replaceSubrange(curv, with: Data("junk".utf8))
        // libpng refuses to write a broken profile; JPEG's APP2 carries anything.
        let jpeg = try Self.solid([128, 64, 200], profile: junk, format: "JPEG")
        #expect(try MagickImage.decode(jpeg, format: .jpeg).embeddedProfile() != nil)
        let (processed, out) = try Fixture.run(jpeg, "resize(20x20) |> format(png)")
        #expect(processed.width == 20)
        #expect(abs(out.pixel(x: 10, y: 10).green * 255 - 64) < 3)
    }
}
