internal import CImageCodecs
import Foundation
import HalcyonRuntime

/// ImageMagick 6's separable Gaussian (`-blur 0xσ`, `BlurImage`), done on a frame's exported
/// 16-bit samples: the same kernel (a Gaussian sampled three times finer and summed into
/// `width(sigma:)` taps, normalised), rows then columns, edge pixels repeated, each pass
/// rounded to 16 bits as ImageMagick's Q16 build rounds it, sums in `double` as ImageMagick's
/// are — bit for bit its output (tested), in flat multiply-add loops the compiler vectorises,
/// where ImageMagick walks its pixel cache pixel by pixel.
enum SeparableGaussian {
    /// `GetOptimalKernelWidth1D(0, σ)` for 16-bit samples: the narrowest odd width whose
    /// outermost tap is still perceptible (≥ 1/65535 of the normalised kernel).
    static func width(sigma: Double) -> Int {
        let alpha = 1 / (2 * sigma * sigma), beta = 1 / ((2 * Double.pi).squareRoot() * sigma)
        var width = 5
        while true {
            let j = (width - 1) / 2
            var normalize = 0.0
            for i in -j...j { normalize += exp(-Double(i * i) * alpha) * beta }
            let value = exp(-Double(j * j) * alpha) * beta / normalize
            if value < 1.0 / 65535 || value < 1e-12 { break }
            width += 2
        }
        return width - 2
    }

    /// The normalised 1-D kernel: a Gaussian of 3σ sampled at every integer of the range three
    /// times as wide, each three samples summed into one tap.
    static func kernel(sigma: Double) -> [Double] {
        let width = width(sigma: sigma), rank = 3
        var taps = [Double](repeating: 0, count: width)
        let v = (width * rank - 1) / 2
        let s = sigma * Double(rank)
        let alpha = 1 / (2 * s * s), beta = 1 / ((2 * Double.pi).squareRoot() * s)
        for u in -v...v { taps[(u + v) / rank] += exp(-Double(u * u) * alpha) * beta }
        let sum = taps.reduce(0, +)
        return taps.map { $0 / sum }
    }

    /// Blurs `pixels` (`width`×`height`, `channels` interleaved 16-bit samples: RGB, or RGBA
    /// whose colours are weighted by their alpha as ImageMagick weights them, so transparent
    /// pixels lend no colour) in place; false when its buffers could not be allocated. The loops
    /// are C (`hc_gaussian_u16`, built optimised even in a debug build).
    /// When `cancel` is raised the loops stop at the next row and this returns false.
    static func blur(
        _ pixels: UnsafeMutablePointer<UInt16>, width: Int, height: Int, channels: Int, sigma: Double, alphaWeighted: Bool = true,
        cancel: CancellationFlag? = nil
    ) -> Bool {
        precondition(channels == 3 || channels == 4)
        let kernel = kernel(sigma: sigma)
        let weighted: Int32 = channels == 4 && alphaWeighted ? 1 : 0
        guard let cancel else {
            return hc_gaussian_u16(pixels, Int32(width), Int32(height), Int32(channels), kernel, Int32(kernel.count), weighted, nil, nil) == 0
        }
        return withExtendedLifetime(cancel) {
            hc_gaussian_u16(
                pixels, Int32(width), Int32(height), Int32(channels), kernel, Int32(kernel.count), weighted,
                { context in Unmanaged<CancellationFlag>.fromOpaque(context!).takeUnretainedValue().isCancelled ? 1 : 0 },
                Unmanaged.passUnretained(cancel).toOpaque()) == 0
        }
    }

    /// ImageMagick's `-unsharp 0xσ+amount+0` (`UnsharpMaskImage` with no threshold): each
    /// colour sample moved away from its blurred value (blurred without alpha weighting, as
    /// ImageMagick blurs for its mask) by `amount` times the difference, rounded and clamped to
    /// 16 bits; alpha unchanged.
    static func unsharp(
        _ pixels: UnsafeMutablePointer<UInt16>, width: Int, height: Int, channels: Int, sigma: Double, amount: Double,
        cancel: CancellationFlag? = nil
    ) -> Bool {
        let count = width * height * channels
        let blurred = UnsafeMutablePointer<UInt16>.allocate(capacity: max(count, 1))
        defer { blurred.deallocate() }
        blurred.update(from: pixels, count: count)
        guard blur(blurred, width: width, height: height, channels: channels, sigma: sigma, alphaWeighted: false, cancel: cancel) else {
            return false
        }
        for i in 0..<count {
            if channels == 4, i % 4 == 3 { continue }
            let p = Double(pixels[i])
            pixels[i] = UInt16(min(max(p + (p - Double(blurred[i])) * amount + 0.5, 0), 65535))
        }
        return true
    }
}
