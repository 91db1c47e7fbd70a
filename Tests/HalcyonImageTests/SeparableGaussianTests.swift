internal import CMagickWand
import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonSamples
import Testing

@testable import HalcyonImage

/// `SeparableGaussian` against ImageMagick's own `BlurImage` and `UnsharpMaskImage`, on the
/// same 16-bit samples: bit for bit.
@Suite struct SeparableGaussianTests {
    static func samples(_ image: MagickImage, alpha: Bool) -> [UInt16] {
        let n = image.width * image.height * (alpha ? 4 : 3)
        var out = [UInt16](repeating: 0, count: n)
        out.withUnsafeMutableBufferPointer {
            _ = MagickExportImagePixels(image.wand, 0, 0, image.width, image.height, alpha ? "RGBA" : "RGB", ShortPixel, $0.baseAddress)
        }
        return out
    }

    /// A photo-like image, with a varying alpha when `alpha`.
    static func source(alpha: Bool) throws -> Data {
        let w = 97, h = 61
        var px: [UInt8] = []
        for y in 0..<h {
            for x in 0..<w {
                px += [UInt8((x * 7 + y * 3) % 256), UInt8((x * x + y * 11) % 256), UInt8((x * 13 ^ y * 5) % 256)]
                if alpha { px.append(UInt8(x < 20 ? 0 : min(255, (x + y) * 3))) }
            }
        }
        return try SampleImages.encode(pixels: px, width: w, height: h, alpha: alpha, format: .png, quality: 90)
    }

    @Test(arguments: [(0.8, false), (2.0, false), (5.0, false), (2.0, true), (6.0, true)])
    func matchesImageMagick(sigma: Double, alpha: Bool) throws {
        let data = try Self.source(alpha: alpha)
        let reference = try MagickImage.decode(data, format: .png), mine = try MagickImage.decode(data, format: .png)
        #expect(MagickBlurImage(reference.wand, 0, sigma) == MagickTrue)
        var pixels = Self.samples(mine, alpha: alpha)
        pixels.withUnsafeMutableBufferPointer {
            #expect(SeparableGaussian.blur($0.baseAddress!, width: mine.width, height: mine.height, channels: alpha ? 4 : 3, sigma: sigma))
        }
        let expected = Self.samples(reference, alpha: alpha)
        var worst = 0, worstAt = 0
        for i in pixels.indices where abs(Int(pixels[i]) - Int(expected[i])) > worst {
            worst = abs(Int(pixels[i]) - Int(expected[i]))
            worstAt = i
        }
        let channels = alpha ? 4 : 3
        print(
            "sigma \(sigma) alpha \(alpha): width \(SeparableGaussian.width(sigma: sigma)), worst 16-bit difference \(worst) at channel \(worstAt % channels), pixel \(worstAt / channels)"
        )
        #expect(worst == 0)
    }

    /// A raised flag stops the C loops at their next row: the call answers false (the C side
    /// returns that only from its stop).
    @Test func aRaisedFlagStopsTheLoops() {
        let (w, h) = (2000, 1000)
        var pixels = [UInt16](repeating: 1000, count: w * h * 3)
        let flag = CancellationFlag()
        flag.cancel()
        pixels.withUnsafeMutableBufferPointer {
            #expect(!SeparableGaussian.blur($0.baseAddress!, width: w, height: h, channels: 3, sigma: 100, cancel: flag))
            #expect(!SeparableGaussian.unsharp($0.baseAddress!, width: w, height: h, channels: 3, sigma: 100, amount: 1, cancel: flag))
        }
        pixels.withUnsafeMutableBufferPointer {
            #expect(SeparableGaussian.blur($0.baseAddress!, width: 64, height: 2, channels: 3, sigma: 1, cancel: CancellationFlag()))
        }
    }

    @Test(arguments: [(1.0, false), (2.0, true), (1.0, true), (4.0, false)])
    func unsharpMatchesImageMagick(sigma: Double, alpha: Bool) throws {
        let data = try Self.source(alpha: alpha)
        let amount = MagickImage.sharpenAmount(sigma: sigma)
        let reference = try MagickImage.decode(data, format: .png), mine = try MagickImage.decode(data, format: .png)
        #expect(MagickUnsharpMaskImage(reference.wand, 0, sigma, amount, 0) == MagickTrue)
        var pixels = Self.samples(mine, alpha: alpha)
        pixels.withUnsafeMutableBufferPointer {
            #expect(
                SeparableGaussian.unsharp(
                    $0.baseAddress!, width: mine.width, height: mine.height, channels: alpha ? 4 : 3, sigma: sigma, amount: amount))
        }
        let expected = Self.samples(reference, alpha: alpha)
        let worst = zip(pixels, expected).map { abs(Int($0) - Int($1)) }.max() ?? 0
        print("unsharp sigma \(sigma) alpha \(alpha): worst 16-bit difference \(worst)")
        #expect(worst == 0)
    }

    /// The steps themselves (export, the passes, import; alpha found) against ImageMagick's calls.
    @Test(arguments: [false, true])
    func blurAndSharpenStepsMatchImageMagick(alpha: Bool) throws {
        let data = try Self.source(alpha: alpha)
        let blurred = try MagickImage.decode(data, format: .png), blurReference = try MagickImage.decode(data, format: .png)
        try blurred.blur(sigma: 2)
        #expect(MagickBlurImage(blurReference.wand, 0, 2) == MagickTrue)
        let sharpened = try MagickImage.decode(data, format: .png), sharpenReference = try MagickImage.decode(data, format: .png)
        try sharpened.sharpen(sigma: 1.5)
        #expect(MagickUnsharpMaskImage(sharpenReference.wand, 0, 1.5, MagickImage.sharpenAmount(sigma: 1.5), 0) == MagickTrue)
        for (mine, reference) in [(blurred, blurReference), (sharpened, sharpenReference)] {
            let a = Self.samples(mine, alpha: alpha), b = Self.samples(reference, alpha: alpha)
            #expect(a == b)
        }
    }
}
