import Foundation

/// ImageMagick 6's separable Gaussian (`-blur 0xσ`, `BlurImage`), done on a frame's exported
/// 16-bit samples: the same kernel (a Gaussian sampled three times finer and summed into
/// `width(sigma:)` taps, normalised), rows then columns, edge pixels repeated, each pass
/// rounded to 16 bits as ImageMagick's Q16 build rounds it, sums in `Double` as ImageMagick's
/// are — bit for bit its output (tested), in a few flat multiply-add loops the compiler
/// vectorises, where ImageMagick walks its pixel cache pixel by pixel.
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
    /// pixels lend no colour) in place.
    static func blur(
        _ pixels: UnsafeMutablePointer<UInt16>, width: Int, height: Int, channels: Int, sigma: Double, alphaWeighted: Bool = true
    ) {
        precondition(channels == 3 || channels == 4)
        let weighting = channels == 4 && alphaWeighted
        let kernel = kernel(sigma: sigma)
        let reach = (kernel.count - 1) / 2
        let rowLength = width * channels
        // Rows: each row widened by `reach` repeated edge pixels on both sides, as floats.
        let padded = UnsafeMutablePointer<Double>.allocate(capacity: (width + 2 * reach) * channels)
        let sums = UnsafeMutablePointer<Double>.allocate(capacity: max(rowLength, 1))
        defer {
            padded.deallocate()
            sums.deallocate()
        }
        for y in 0..<height {
            let row = pixels + y * rowLength
            for x in -reach..<(width + reach) {
                load(row + min(max(x, 0), width - 1) * channels, into: padded + (x + reach) * channels, channels: channels, weighting: weighting)
            }
            sums.initialize(repeating: 0, count: rowLength)
            for (t, k) in kernel.enumerated() {
                let tap = padded + t * channels
                for i in 0..<rowLength { sums[i] += k * tap[i] }
            }
            store(sums, into: row, count: rowLength, weighting: weighting)
        }
        // Columns: a whole row of sums at a time, from the rows above and below (edges
        // repeated), each converted once into a ring of 2 × reach + 1 rows — converted before
        // the output overwrites it.
        let ringRows = 2 * reach + 1
        let ring = UnsafeMutablePointer<Double>.allocate(capacity: ringRows * rowLength)
        defer { ring.deallocate() }
        var converted = -1
        func convert(through last: Int) {
            while converted < min(last, height - 1) {
                converted += 1
                let from = pixels + converted * rowLength, to = ring + (converted % ringRows) * rowLength
                for x in 0..<width { load(from + x * channels, into: to + x * channels, channels: channels, weighting: weighting) }
            }
        }
        for y in 0..<height {
            convert(through: y + reach)
            sums.initialize(repeating: 0, count: rowLength)
            for (t, k) in kernel.enumerated() {
                let source = ring + (min(max(y - reach + t, 0), height - 1) % ringRows) * rowLength
                for i in 0..<rowLength { sums[i] += k * source[i] }
            }
            store(sums, into: pixels + y * rowLength, count: rowLength, weighting: weighting)
        }
    }

    /// ImageMagick's `-unsharp 0xσ+amount+0` (`UnsharpMaskImage` with no threshold): each
    /// colour sample moved away from its blurred value (blurred without alpha weighting, as
    /// ImageMagick blurs for its mask) by `amount` times the difference, rounded and clamped to
    /// 16 bits; alpha unchanged.
    static func unsharp(_ pixels: UnsafeMutablePointer<UInt16>, width: Int, height: Int, channels: Int, sigma: Double, amount: Double) {
        let count = width * height * channels
        let blurred = UnsafeMutablePointer<UInt16>.allocate(capacity: max(count, 1))
        defer { blurred.deallocate() }
        blurred.update(from: pixels, count: count)
        blur(blurred, width: width, height: height, channels: channels, sigma: sigma, alphaWeighted: false)
        let gain = amount
        for i in 0..<count {
            if channels == 4, i % 4 == 3 { continue }
            let p = Double(pixels[i])
            pixels[i] = UInt16(min(max(p + (p - Double(blurred[i])) * gain + 0.5, 0), 65535))
        }
    }

    /// One pixel as the passes add it up: as it is, or (`weighting`, RGBA) colour × alpha and
    /// alpha (0…1).
    @inline(__always)
    static func load(_ pixel: UnsafePointer<UInt16>, into out: UnsafeMutablePointer<Double>, channels: Int, weighting: Bool) {
        if !weighting {
            for c in 0..<channels { out[c] = Double(pixel[c]) }
        } else {
            let a = Double(pixel[3]) / 65535
            for c in 0..<3 { out[c] = Double(pixel[c]) * a }
            out[3] = a
        }
    }

    /// A row of sums back to 16-bit samples (RGBA: colours divided by their summed alpha),
    /// rounded as ImageMagick's `ClampToQuantum` rounds (half up, clamped).
    static func store(_ sums: UnsafeMutablePointer<Double>, into row: UnsafeMutablePointer<UInt16>, count: Int, weighting: Bool) {
        if weighting {
            var i = 0
            while i < count {
                let a = sums[i + 3]
                let gamma: Double = a > 1e-12 ? 1 / a : 0
                for c in 0..<3 { sums[i + c] *= gamma }
                sums[i + 3] = a * 65535
                i += 4
            }
        }
        for i in 0..<count { row[i] = UInt16(min(max(sums[i] + 0.5, 0), 65535)) }
    }
}
