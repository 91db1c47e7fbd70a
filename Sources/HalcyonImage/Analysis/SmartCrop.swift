import Foundation
import HalcyonChain

/// Chooses a crop window from the pixels (`Gravity.entropy`, `.attention`) on a small copy of
/// the image (`analysisSide` a side at most), then maps it back to the image's size.
enum SmartCrop {
    static let analysisSide = 160

    /// The top-left corner of a `window`-sized window in an image of `size`, judged on
    /// `thumb` (that image scaled down).
    static func origin(_ gravity: Gravity, window: ImageSize, in size: ImageSize, thumb: Thumbnail) -> (x: Int, y: Int) {
        let kx = Double(thumb.width) / Double(size.width), ky = Double(thumb.height) / Double(size.height)
        let w = min(thumb.width, max(1, Int((Double(window.width) * kx).rounded())))
        let h = min(thumb.height, max(1, Int((Double(window.height) * ky).rounded())))
        let luma = thumb.luma()
        let (tx, ty) =
            gravity == .entropy
            ? trimByEntropy(luma, thumb.width, thumb.height, w, h)
            : bestSum(attention(thumb, luma), thumb.width, thumb.height, w, h)
        let freeX = size.width - window.width, freeY = size.height - window.height
        return (min(freeX, max(0, Int((Double(tx) / kx).rounded()))), min(freeY, max(0, Int((Double(ty) / ky).rounded()))))
    }

    /// libvips' `entropy` strategy: while the image is wider (taller) than the window, cut a
    /// slice off whichever edge holds less information (Shannon entropy of its luma).
    static func trimByEntropy(_ luma: [UInt8], _ width: Int, _ height: Int, _ w: Int, _ h: Int) -> (Int, Int) {
        var left = 0, right = width, top = 0, bottom = height
        let step = max(1, max(width, height) / 32)
        while right - left > w {
            let slice = min(step, right - left - w)
            if entropy(luma, width, left..<(left + slice), top..<bottom) < entropy(luma, width, (right - slice)..<right, top..<bottom) {
                left += slice
            } else {
                right -= slice
            }
        }
        while bottom - top > h {
            let slice = min(step, bottom - top - h)
            if entropy(luma, width, left..<right, top..<(top + slice)) < entropy(luma, width, left..<right, (bottom - slice)..<bottom) {
                top += slice
            } else {
                bottom -= slice
            }
        }
        return (left, top)
    }

    static func entropy(_ luma: [UInt8], _ width: Int, _ columns: Range<Int>, _ rows: Range<Int>) -> Double {
        var histogram = [Int](repeating: 0, count: 256)
        for y in rows { for x in columns { histogram[Int(luma[y * width + x])] += 1 } }
        let n = Double(columns.count * rows.count)
        return histogram.reduce(0.0) { e, c in c == 0 ? e : e - Double(c) / n * log2(Double(c) / n) }
    }

    /// The attention map: edges (|Laplacian| of luma), skin tones and saturated colour, each
    /// 0–255, summed (libvips' `attention` looks for the same three).
    static func attention(_ thumb: Thumbnail, _ luma: [UInt8]) -> [Double] {
        let w = thumb.width, h = thumb.height
        var score = [Double](repeating: 0, count: w * h)
        for y in 0..<h {
            for x in 0..<w {
                let i = y * w + x
                let l = Double(luma[i])
                // Neighbours clamped at the edges; no allocation per pixel.
                let left = Double(luma[i - (x > 0 ? 1 : 0)]), right = Double(luma[i + (x < w - 1 ? 1 : 0)])
                let up = Double(luma[i - (y > 0 ? w : 0)]), down = Double(luma[i + (y < h - 1 ? w : 0)])
                let edge = min(255, abs(4 * l - left - right - up - down))
                let r = Double(thumb.rgba[i * 4]), g = Double(thumb.rgba[i * 4 + 1]), b = Double(thumb.rgba[i * 4 + 2])
                let alpha = Double(thumb.rgba[i * 4 + 3]) / 255
                let sum = r + g + b, hi = max(r, g, b), lo = min(r, g, b)
                // Skin: chromaticity near (r, g) = (0.44, 0.31), not too dark.
                let skin = sum > 120 ? max(0, 1 - hypot(r / sum - 0.44, g / sum - 0.31) / 0.06) * 255 : 0
                // Saturation weighted by brightness (HSV's S·V): vivid colour, not dark noise.
                let saturation = hi - lo  // S·V = (hi − lo)/hi · hi
                score[i] = (edge + skin + (saturation > 90 ? saturation : 0)) * alpha
            }
        }
        return score
    }

    /// The w×h window whose scores sum highest (ties: the one nearest the centre).
    static func bestSum(_ score: [Double], _ width: Int, _ height: Int, _ w: Int, _ h: Int) -> (Int, Int) {
        // Summed-area table, one row and column of zeros in front.
        var table = [Double](repeating: 0, count: (width + 1) * (height + 1))
        for y in 0..<height {
            var row = 0.0
            for x in 0..<width {
                row += score[y * width + x]
                table[(y + 1) * (width + 1) + x + 1] = table[y * (width + 1) + x + 1] + row
            }
        }
        func sum(_ x: Int, _ y: Int) -> Double {
            let s = width + 1
            return table[(y + h) * s + x + w] - table[y * s + x + w] - table[(y + h) * s + x] + table[y * s + x]
        }
        let cx = Double(width - w) / 2, cy = Double(height - h) / 2
        var best = (x: Int(cx), y: Int(cy)), bestScore = -1.0, bestDistance = Double.infinity
        for y in 0...(height - h) {
            for x in 0...(width - w) {
                let s = sum(x, y), d = hypot(Double(x) - cx, Double(y) - cy)
                if s > bestScore + 1e-9 || (abs(s - bestScore) <= 1e-9 && d < bestDistance) {
                    (best, bestScore, bestDistance) = ((x, y), s, d)
                }
            }
        }
        return best
    }
}

extension Thumbnail {
    /// Rec. 601 luma of each pixel.
    func luma() -> [UInt8] {
        (0..<(width * height)).map { i -> UInt8 in
            let r: Int = 299 * Int(rgba[i * 4]), g: Int = 587 * Int(rgba[i * 4 + 1]), b: Int = 114 * Int(rgba[i * 4 + 2])
            return UInt8((r + g + b + 500) / 1000)
        }
    }
}
