internal import CMagickWand
import Foundation
import HalcyonCore
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
