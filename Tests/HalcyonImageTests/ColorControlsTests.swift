internal import CMagickWand
import Foundation
import HalcyonDomain
import HalcyonSamples
import Testing

@testable import HalcyonImage

/// `colorControls` computes ImageMagick's `-modulate` and polynomial on the samples; the
/// reference is ImageMagick's own calls, which it made before.
@Suite struct ColorControlsTests {
    static func reference(_ image: MagickImage, brightness: Double, contrast: Double, saturation: Double) {
        if saturation != 1 { #expect(MagickModulateImage(image.wand, 100, saturation * 100, 100) == MagickTrue) }
        if brightness != 0 || contrast != 1 {
            var c = [contrast, 0.5 - 0.5 * contrast + brightness]
            let rgb = ChannelType(rawValue: RedChannel.rawValue | GreenChannel.rawValue | BlueChannel.rawValue)
            #expect(MagickFunctionImageChannel(image.wand, rgb, PolynomialFunction, 2, &c) == MagickTrue)
        }
    }

    /// Every hue sector, greys, black, white, pure and near-pure colours; alpha a ramp when `alpha`.
    static func palette(alpha: Bool) throws -> Data {
        let w = 256, h = 64
        var px: [UInt8] = []
        for y in 0..<h {
            for x in 0..<w {
                let v = UInt8(x), u = UInt8((y * 4) & 255)
                let rgb: [UInt8] =
                    switch y % 8 {
                    case 0: [v, v, v]
                    case 1: [255, v, 0]
                    case 2: [v, 255, u]
                    case 3: [0, v, 255]
                    case 4: [v, u, 255 - v]
                    case 5: [255 - v, 0, v]
                    case 6: [v, v &+ 1, v]
                    default: [u, 255 - v, v]
                    }
                px += rgb
                if alpha { px.append(UInt8((x + y) % 256)) }
            }
        }
        return try SampleImages.encode(pixels: px, width: w, height: h, alpha: alpha, format: .png, quality: 90)
    }

    static let settings: [(Double, Double, Double)] = [
        (0, 1, 1.3), (0, 1.2, 1.3), (0.1, 1.2, 1.3), (-0.3, 0.5, 0), (0, 4, 4), (0, 1, 0), (0.25, 1, 1), (0, 0.8, 0.7), (1, 1, 1),
    ]

    static func compare(_ data: Data, format: ImageFormat, colorspace: ColorspaceType? = nil, alpha: Bool) throws {
        for (brightness, contrast, saturation) in settings {
            let mine = try MagickImage.decode(data, format: format), expected = try MagickImage.decode(data, format: format)
            if let colorspace {
                #expect(MagickTransformImageColorspace(mine.wand, colorspace) == MagickTrue)
                #expect(MagickTransformImageColorspace(expected.wand, colorspace) == MagickTrue)
            }
            try mine.colorControls(brightness: brightness, contrast: contrast, saturation: saturation)
            reference(expected, brightness: brightness, contrast: contrast, saturation: saturation)
            let a = SeparableGaussianTests.samples(mine, alpha: alpha), b = SeparableGaussianTests.samples(expected, alpha: alpha)
            let differing = zip(a, b).filter { $0 != $1 }.count
            #expect(differing == 0, "brightness \(brightness), contrast \(contrast), saturation \(saturation): \(differing) samples differ")
        }
    }

    @Test(arguments: [false, true])
    func matchesImageMagickOnEveryHue(alpha: Bool) throws {
        try Self.compare(try Self.palette(alpha: alpha), format: .png, alpha: alpha)
    }

    /// A photo (16-bit samples after decoding, not only 8-bit steps), grey, and CMYK (left to
    /// ImageMagick).
    @Test func matchesImageMagickOnPhotosGreyAndCMYK() throws {
        let photo = try SampleImages.photo(width: 300, height: 200, seed: 11)
        try Self.compare(photo, format: .jpeg, alpha: false)
        try Self.compare(photo, format: .jpeg, colorspace: GRAYColorspace, alpha: false)
        try Self.compare(photo, format: .jpeg, colorspace: CMYKColorspace, alpha: false)
        let blurred = try MagickImage.decode(photo, format: .jpeg), reference = try MagickImage.decode(photo, format: .jpeg)
        for image in [blurred, reference] { try image.blur(sigma: 1.5) }  // samples that are not multiples of 257
        try blurred.colorControls(brightness: 0.05, contrast: 1.2, saturation: 1.3)
        Self.reference(reference, brightness: 0.05, contrast: 1.2, saturation: 1.3)
        let a = SeparableGaussianTests.samples(blurred, alpha: false), b = SeparableGaussianTests.samples(reference, alpha: false)
        #expect(zip(a, b).filter { $0 != $1 }.count == 0)
    }
}
