internal import CMagickWand
import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonImage

/// Measures how far a produced image is from the best one could make: the source decoded in
/// full (no shrink-on-load), flattened onto white, resized with ImageMagick's own Lanczos to
/// cover the box and centre-cropped — what `resize(WxH, mode=fill)` means with no shortcuts.
/// `halcyon bench` holds Halcyon's outputs and its peers' to this reference.
public enum QualityReference {
    /// The reference `width`×`height` fill of `source`, as 16-bit RGB samples.
    public static func fill(_ source: Data, format: ImageFormat, width: Int, height: Int) throws(HalcyonError) -> [UInt16] {
        let image = try MagickImage.decode(source, format: format)
        image.keepFirstFrame()
        try image.autoOrient()
        try image.toSRGB()
        if image.hasAlpha { try image.flatten(onto: white) }
        let k = max(Double(width) / Double(image.width), Double(height) / Double(image.height))
        let cw = max(width, Int((Double(image.width) * k).rounded())), ch = max(height, Int((Double(image.height) * k).rounded()))
        guard MagickResizeImage(image.wand, cw, ch, LanczosFilter, 1.0) == MagickTrue else {
            throw MagickImage.error(image.wand, .processingFailed, "reference resize")
        }
        try image.crop(width: width, height: height, x: (cw - width) / 2, y: (ch - height) / 2)
        return samples(image)
    }

    private static let white = Color(red: 255, green: 255, blue: 255)

    /// PSNR in dB of an encoded image against reference samples of the same size; nil when the
    /// image cannot be decoded or its size differs.
    public static func psnr(_ encoded: Data, format: ImageFormat, against reference: [UInt16]) -> Double? {
        guard let image = try? MagickImage.decode(encoded, format: format) else { return nil }
        if image.hasAlpha { try? image.flatten(onto: white) }
        let s = samples(image)
        guard s.count == reference.count, !s.isEmpty else { return nil }
        return psnr(s, reference)
    }

    /// PSNR in dB of two equal-length 16-bit sample arrays (infinity when identical).
    public static func psnr(_ a: [UInt16], _ b: [UInt16]) -> Double {
        var sum = 0.0
        for i in a.indices {
            let d = (Double(a[i]) - Double(b[i])) / 65535
            sum += d * d
        }
        let mse = sum / Double(a.count)
        return mse == 0 ? .infinity : 10 * log10(1 / mse)
    }

    /// 16-bit RGB samples of the current frame.
    package static func samples(_ image: MagickImage) -> [UInt16] {
        var out = [UInt16](repeating: 0, count: image.width * image.height * 3)
        out.withUnsafeMutableBytes { _ = MagickExportImagePixels(image.wand, 0, 0, image.width, image.height, "RGB", ShortPixel, $0.baseAddress) }
        return out
    }
}
