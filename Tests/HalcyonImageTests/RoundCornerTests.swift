internal import CMagickWand
import Foundation
import HalcyonDomain
import HalcyonSamples
import Testing

@testable import HalcyonImage

/// `roundCorners` draws its mask only around the corners and applies it to the samples; the
/// reference is what it did before: a full-size mask `DstIn`-composited by ImageMagick.
@Suite struct RoundCornerTests {
    typealias Corners = (Bool, Bool, Bool, Bool)

    static func reference(_ image: MagickImage, radius: Double, corners: Corners) {
        let r = min(radius, Double(image.width) / 2, Double(image.height) / 2)
        let mask = MagickImage.cornerMask(width: image.width, height: image.height, radius: r, corners: corners)!
        defer { DestroyMagickWand(mask) }
        MagickSetImageAlphaChannel(image.wand, SetAlphaChannel)
        #expect(MagickCompositeImage(image.wand, mask, DstInCompositeOp, 0, 0) == MagickTrue)
    }

    static func compare(
        _ data: Data, format: ImageFormat, colorspace: ColorspaceType? = nil, radius: Double, corners: Corners
    ) throws {
        let mine = try MagickImage.decode(data, format: format), expected = try MagickImage.decode(data, format: format)
        if let colorspace {
            #expect(MagickTransformImageColorspace(mine.wand, colorspace) == MagickTrue)
            #expect(MagickTransformImageColorspace(expected.wand, colorspace) == MagickTrue)
        }
        try mine.roundCorners(radius: radius, topLeft: corners.0, topRight: corners.1, bottomLeft: corners.2, bottomRight: corners.3)
        reference(expected, radius: radius, corners: corners)
        #expect(MagickGetImageAlphaChannel(mine.wand) == MagickTrue)
        let a = SeparableGaussianTests.samples(mine, alpha: true), b = SeparableGaussianTests.samples(expected, alpha: true)
        let differing = zip(a, b).filter { $0 != $1 }.count
        #expect(differing == 0, "radius \(radius), corners \(corners): \(differing) samples differ")
        if radius == 0 {
            // Nothing cut (ImageMagick's round rectangle of radius 0 is empty: once, everything was).
            let before = SeparableGaussianTests.samples(try MagickImage.decode(data, format: format), alpha: true)
            #expect(stride(from: 3, to: a.count, by: 4).allSatisfy { a[$0] == before[$0] })
        }
    }

    @Test(arguments: [0, 1, 3, 7.3, 10.5, 24, 29.5, 30.5, 1000])
    func matchesAFullSizeMask(radius: Double) throws {
        for alpha in [false, true] {
            let data = try SeparableGaussianTests.source(alpha: alpha)
            for corners in [(true, true, true, true), (true, true, false, false), (false, true, false, true), (false, false, false, true)] {
                try Self.compare(data, format: .png, radius: radius, corners: corners)
            }
        }
    }

    /// A photo larger than its corners, a grey image, and a CMYK JPEG (which takes
    /// ImageMagick's own composite).
    @Test func matchesOnPhotosGreyAndCMYK() throws {
        let photo = try SampleImages.photo(width: 400, height: 300, seed: 7)
        try Self.compare(photo, format: .jpeg, radius: 24, corners: (true, true, true, true))
        try Self.compare(photo, format: .jpeg, radius: 61.7, corners: (true, false, true, false))
        try Self.compare(photo, format: .jpeg, colorspace: GRAYColorspace, radius: 12, corners: (true, true, true, true))
        try Self.compare(photo, format: .jpeg, colorspace: CMYKColorspace, radius: 20, corners: (true, true, false, true))
    }
}
