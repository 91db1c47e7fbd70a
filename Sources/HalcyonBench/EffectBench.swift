internal import CMagickWand
import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonImage
import HalcyonQualityReference
import HalcyonRuntime

/// For `halcyon bench`'s E set: `blur` and `sharpen` as Halcyon runs them against ImageMagick's
/// 2-D kernels (`MagickGaussianBlurImage`, `MagickSharpenImage`) on the same decoded image, one
/// thread each: milliseconds (median of `repeats`) and the PSNR between the two outputs.
public enum EffectBench {
    public struct Row: Sendable {
        public var step: String
        public var halcyonMs: Double
        public var twoDimensionalMs: Double
        public var psnr: Double
    }

    /// The steps measured: small and large sigmas of each.
    public static let steps: [(name: String, sigma: Double)] = [("blur", 2), ("blur", 8), ("sharpen", 1), ("sharpen", 4)]

    /// Blocking: call from a Dispatch thread. A source wider than `maxWidth` is first scaled
    /// down to it (quick runs measure on a small image).
    public static func measure(
        _ source: Data, format: ImageFormat, maxWidth: Int = .max, repeats: Int
    ) throws(HalcyonError) -> (size: ImageSize, rows: [Row]) {
        let base = try MagickImage.decode(source, format: format)
        try base.toSRGB()
        if base.width > maxWidth {
            try base.scale(width: maxWidth, height: max(1, base.height * maxWidth / base.width))
        }
        var rows: [Row] = []
        for (name, sigma) in steps {
            var ours: [Double] = [], reference: [Double] = []
            var last: (MagickImage, MagickImage)?
            for _ in 0..<max(1, repeats) {
                let a = base.clone(), b = base.clone()
                var started = ContinuousClock.now
                if name == "blur" { try a.blur(sigma: sigma) } else { try a.sharpen(sigma: sigma) }
                ours.append((ContinuousClock.now - started).seconds * 1000)
                started = ContinuousClock.now
                _ = name == "blur" ? MagickGaussianBlurImage(b.wand, 0, sigma) : MagickSharpenImage(b.wand, 0, sigma)
                reference.append((ContinuousClock.now - started).seconds * 1000)
                last = (a, b)
            }
            let psnr = last.map { QualityReference.psnr(QualityReference.samples($0.0), QualityReference.samples($0.1)) } ?? 0
            rows.append(
                Row(step: "\(name)(\(formatNumber(sigma)))", halcyonMs: Self.median(ours), twoDimensionalMs: Self.median(reference), psnr: psnr))
        }
        return (ImageSize(width: base.width, height: base.height), rows)
    }

    private static func median(_ v: [Double]) -> Double {
        let s = v.sorted()
        return s.isEmpty ? 0 : s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }
}
