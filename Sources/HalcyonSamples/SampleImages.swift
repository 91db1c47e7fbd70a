internal import CMagickWand
import Foundation
import HalcyonDomain
import HalcyonImage

/// Deterministic, photo-like test images (smooth colour fields, edges and grain), for the demo,
/// the benchmark corpus and the tests. Same seed, same bytes.
public enum SampleImages {
    /// Encodes a generated `width`×`height` image. `alpha` adds a transparent-to-opaque ramp.
    public static func photo(
        width: Int, height: Int, seed: UInt64, format: ImageFormat = .jpeg,
        quality: Int = 85, alpha: Bool = false
    ) throws(HalcyonError) -> Data {
        let channels = alpha ? 4 : 3
        var pixels = [UInt8](repeating: 0, count: width * height * channels)
        var rng = SplitMix(seed: seed)
        // A few random colour blobs blended smoothly, plus per-pixel grain.
        let blobs = (0..<6).map { _ in
            (
                x: rng.unit() * Double(width), y: rng.unit() * Double(height),
                r: rng.unit() * 255, g: rng.unit() * 255, b: rng.unit() * 255,
                radius: (0.2 + rng.unit() * 0.5) * Double(max(width, height))
            )
        }
        let stripe = 8 + Int(rng.unit() * 40)
        for y in 0..<height {
            for x in 0..<width {
                var r = 0.0, g = 0.0, b = 0.0, wsum = 1e-6
                for blob in blobs {
                    let dx = Double(x) - blob.x, dy = Double(y) - blob.y
                    let w = 1 / (1 + (dx * dx + dy * dy) / (blob.radius * blob.radius) * 4)
                    r += blob.r * w; g += blob.g * w; b += blob.b * w; wsum += w
                }
                let edge = ((x / stripe + y / (stripe * 2)) % 7 == 0) ? 40.0 : 0
                let grain = Double(rng.next() & 31) - 16
                let i = (y * width + x) * channels
                pixels[i] = clamp(r / wsum + grain + edge)
                pixels[i + 1] = clamp(g / wsum + grain)
                pixels[i + 2] = clamp(b / wsum + grain - edge)
                if alpha { pixels[i + 3] = UInt8(min(255, x * 255 / max(1, width - 1))) }
            }
        }
        return try encode(pixels: pixels, width: width, height: height, alpha: alpha, format: format, quality: quality)
    }

    /// A flat single-colour image, e.g. `#ff0000`, for tests that read pixels back.
    public static func solid(
        width: Int, height: Int, red: UInt8, green: UInt8, blue: UInt8,
        format: ImageFormat = .png
    ) throws(HalcyonError) -> Data {
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        for i in stride(from: 0, to: pixels.count, by: 3) { pixels[i] = red; pixels[i + 1] = green; pixels[i + 2] = blue }
        return try encode(pixels: pixels, width: width, height: height, alpha: false, format: format, quality: 95)
    }

    /// `jpeg` with an EXIF APP1 segment whose Orientation tag is `value` (1–8), inserted after
    /// the SOI marker: the pixels stay as stored, viewers rotate them.
    public static func withEXIFOrientation(_ jpeg: Data, _ value: UInt8) -> Data {
        let tiff: [UInt8] = [
            0x4D, 0x4D, 0, 0x2A, 0, 0, 0, 8,  // big-endian TIFF, IFD at 8
            0, 1,  // one entry
            0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, value, 0, 0,  // Orientation, SHORT, 1
            0, 0, 0, 0,
        ]  // no next IFD
        let payload = Array("Exif".utf8) + [0, 0] + tiff
        let length = UInt16(payload.count + 2)
        let app1: [UInt8] = [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload
        return Data(jpeg.prefix(2)) + Data(app1) + Data(jpeg.dropFirst(2))
    }

    /// An animated GIF of `frames` solid frames fading from blue to red.
    public static func animatedGIF(frames: Int, width: Int = 60, height: Int = 40) throws(HalcyonError) -> Data {
        _ = MagickImage.genesisToken
        let image = MagickImage(wand: NewMagickWand()!, format: .gif)
        for i in 0..<frames {
            let level = UInt8(min(255, i * 255 / max(1, frames - 1)))
            image.append(try MagickImage.decode(try solid(width: width, height: height, red: level, green: 0, blue: 255 - level), format: .png))
        }
        image.outputFormat = .gif
        return try image.encode()
    }

    /// Uniform random RGB noise: no encoder keeps it at a high score short of lossless.
    public static func noise(width: Int, height: Int, seed: UInt64, format: ImageFormat = .png) throws(HalcyonError) -> Data {
        var rng = SplitMix(seed: seed)
        let pixels = (0..<width * height * 3).map { _ in UInt8(truncatingIfNeeded: rng.next() >> 56) }
        return try encode(pixels: pixels, width: width, height: height, alpha: false, format: format, quality: 100)
    }

    /// An animation whose frames are `stills` (encoded images of one size), in `format` (GIF or WebP).
    public static func animation(_ stills: [(data: Data, format: ImageFormat)], format: ImageFormat = .gif) throws(HalcyonError) -> Data {
        _ = MagickImage.genesisToken
        let image = MagickImage(wand: NewMagickWand()!, format: format)
        for still in stills { image.append(try MagickImage.decode(still.data, format: still.format)) }
        image.outputFormat = format
        image.outputQuality = 100
        return try image.encode()
    }

    /// `rgb` (packed 8-bit RGB rows) with a watermark-like caption: white strokes over a third of
    /// the pixels of a box in the bottom-right corner (32 % × 6 % of the image).
    public static func captioned(_ rgb: [UInt8], width: Int, height: Int) -> [UInt8] {
        var out = rgb
        for y in (height * 88 / 100)..<(height * 94 / 100) {
            for x in (width * 62 / 100)..<(width * 94 / 100) where (x / 2 + y / 3) % 4 == 0 {
                for c in 0..<3 { out[(y * width + x) * 3 + c] = 255 }
            }
        }
        return out
    }

    public static func encode(pixels: [UInt8], width: Int, height: Int, alpha: Bool, format: ImageFormat, quality: Int) throws(HalcyonError) -> Data {
        _ = MagickImage.genesisToken
        let wand = NewMagickWand()!
        let image = MagickImage(wand: wand, format: format)
        let ok = pixels.withUnsafeBytes { MagickConstituteImage(wand, width, height, alpha ? "RGBA" : "RGB", CharPixel, $0.baseAddress) }
        guard ok == MagickTrue else { throw MagickImage.error(wand, .processingFailed, "constitute sample image") }
        image.outputQuality = quality
        return try image.encode()
    }

    private static func clamp(_ v: Double) -> UInt8 { UInt8(max(0, min(255, v.rounded()))) }
}

/// SplitMix64: tiny, fast, deterministic.
package struct SplitMix {
    var state: UInt64
    package init(seed: UInt64) { state = seed }
    package mutating func next() -> UInt64 {
        state &+= 0x9E3779B97F4A7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58476D1CE4E5B9
        z = (z ^ (z >> 27)) &* 0x94D049BB133111EB
        return z ^ (z >> 31)
    }
    package mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}
