internal import CMagickWand
import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonSamples
import Testing

@testable import HalcyonImage

/// `encodeDirectPNG` takes over from ImageMagick's PNG writer only where it writes the same
/// file: byte for byte what `MagickGetImageBlob` writes, or nothing.
@Suite struct DirectPNGTests {
    /// ImageMagick's own PNG of `image` at zlib `level`, as `encode()` asked for it before.
    static func magickPNG(_ image: MagickImage, level: Int) throws -> Data {
        MagickStripImage(image.wand)
        MagickSetFormat(image.wand, "PNG")
        MagickSetImageFormat(image.wand, "PNG")
        MagickSetOption(image.wand, "png:compression-level", String(level))
        var length = 0
        let blob = try #require(MagickGetImageBlob(image.wand, &length))
        defer { MagickRelinquishMemory(blob) }
        return Data(bytes: blob, count: length)
    }

    static func decoded(_ data: Data, _ format: ImageFormat, _ edit: (MagickImage) throws -> Void = { _ in }) throws -> MagickImage {
        let image = try MagickImage.decode(data, format: format)
        try edit(image)
        MagickStripImage(image.wand)
        return image
    }

    static func sameAsImageMagick(_ data: Data, _ format: ImageFormat, level: Int = 6, _ edit: (MagickImage) throws -> Void = { _ in }) throws {
        let mine = try decoded(data, format, edit), theirs = try decoded(data, format, edit)
        mine.pngCompression = level
        let direct = try #require(try mine.encodeDirectPNG())
        let expected = try magickPNG(theirs, level: level)
        // Compared as a Bool: a failing `==` on two Data would be diffed byte by byte for minutes.
        let same = direct == expected
        #expect(same, "\(direct.count) bytes against ImageMagick's \(expected.count)")
    }

    @Test func photosAreByteForByteImageMagicksAtEveryLevel() throws {
        let photo = try SampleImages.photo(width: 320, height: 200, seed: 3)
        for level in [6, 0, 1, 9] { try Self.sameAsImageMagick(photo, .jpeg, level: level) }
        // Partial alpha: RGBA.
        try Self.sameAsImageMagick(photo, .jpeg) {
            try $0.roundCorners(radius: 20, topLeft: true, topRight: true, bottomLeft: true, bottomRight: true)
        }
        try Self.sameAsImageMagick(try SampleImages.photo(width: 300, height: 180, seed: 4, format: .png, alpha: true), .png)
        // An alpha channel that is opaque throughout: RGB.
        try Self.sameAsImageMagick(photo, .jpeg) { MagickSetImageAlphaChannel($0.wand, SetAlphaChannel) }
    }

    /// The writer's own choices stay its own: grey, a palette, an on/off alpha, 16-bit.
    @Test func leavesOtherImagesToImageMagick() throws {
        let photo = try SampleImages.photo(width: 160, height: 100, seed: 5)
        let grey = try Self.decoded(photo, .jpeg) { #expect(MagickTransformImageColorspace($0.wand, GRAYColorspace) == MagickTrue) }
        #expect(try grey.encodeDirectPNG() == nil)
        let flat = try Self.decoded(try SampleImages.solid(width: 64, height: 64, red: 200, green: 30, blue: 10), .png)
        #expect(try flat.encodeDirectPNG() == nil)
        let cut = try Self.decoded(photo, .jpeg) {
            MagickSetImageAlphaChannel($0.wand, SetAlphaChannel)
            let clear = MagickImage.pixel(Color(red: 0, green: 0, blue: 0, alpha: 0))
            defer { DestroyPixelWand(clear) }
            MagickSetImageBackgroundColor($0.wand, clear)
            #expect(MagickExtentImage($0.wand, 200, 100, 0, 0) == MagickTrue)  // a transparent band, alpha 0 or 255 only
        }
        #expect(try cut.encodeDirectPNG() == nil)
        let deep = try Self.decoded(photo, .jpeg) { MagickSetImageDepth($0.wand, 16) }
        #expect(try deep.encodeDirectPNG() == nil)
    }

    /// `encode()` itself takes the direct path for a photo.
    @Test func encodeUsesIt() throws {
        let photo = try SampleImages.photo(width: 240, height: 160, seed: 6)
        let mine = try MagickImage.decode(photo, format: .jpeg), theirs = try MagickImage.decode(photo, format: .jpeg)
        mine.outputFormat = .png
        let encoded = try mine.encode(), expected = try Self.magickPNG(theirs, level: FormatStep.defaultCompression)
        let same = encoded == expected
        #expect(same, "\(encoded.count) bytes against ImageMagick's \(expected.count)")
    }
}
