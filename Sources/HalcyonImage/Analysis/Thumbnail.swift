internal import CMagickWand
import Foundation
import HalcyonChain
import HalcyonDomain

/// A small 8-bit RGBA copy of a result (at most `maxSide` a side, aspect kept), the input of
/// every placeholder encoder.
struct Thumbnail: Sendable {
    /// The placeholders' input: 64 px a side at most. ThumbHash takes up to 100 (its limit),
    /// but its few DCT terms and BlurHash's see no more in 100 than in 64, and the encoders'
    /// cost goes with the pixel count (2.4× fewer here).
    static let maxSide = 64

    var width: Int
    var height: Int
    /// Rows of RGBA, not premultiplied.
    var rgba: [UInt8]

    static func size(fitting width: Int, _ height: Int, maxSide: Int = maxSide) -> ImageSize {
        let k = min(1, Double(maxSide) / Double(max(width, height)))
        return ImageSize(width: max(1, Int((Double(width) * k).rounded())), height: max(1, Int((Double(height) * k).rounded())))
    }

    /// From the first frame of an ImageMagick image, box-averaged down (the image is not changed).
    init(_ image: MagickImage, maxSide: Int = maxSide) throws(HalcyonError) {
        let s = Self.size(fitting: image.width, image.height, maxSide: maxSide)
        // Without an alpha channel, RGB: every pixel is opaque.
        let (pixels, channels) = try image.firstFrameSamples8(scaledTo: s, for: "placeholders")
        self.init(width: s.width, height: s.height, rgba: channels == 4 ? pixels : Self.opaque(pixels))
    }

    /// RGBA from RGB rows, every pixel opaque.
    private static func opaque(_ rgb: [UInt8]) -> [UInt8] {
        var rgba = [UInt8](repeating: 255, count: rgb.count / 3 * 4)
        for i in 0..<(rgb.count / 3) {
            rgba[i * 4] = rgb[i * 3]
            rgba[i * 4 + 1] = rgb[i * 3 + 1]
            rgba[i * 4 + 2] = rgb[i * 3 + 2]
        }
        return rgba
    }

    /// From the direct lane's pixels.
    init(_ pixels: PixelBuffer) throws(HalcyonError) {
        let s = Self.size(fitting: pixels.width, pixels.height)
        let small = try pixels.resized(to: s, window: nil)
        let packed = Array(UnsafeBufferPointer(start: small.bytes, count: s.width * s.height * small.channels))
        self.init(width: s.width, height: s.height, rgba: small.channels == 4 ? packed : Self.opaque(packed))
    }

    init(width: Int, height: Int, rgba: [UInt8]) {
        precondition(rgba.count == width * height * 4)
        self.width = width
        self.height = height
        self.rgba = rgba
    }

    /// The placeholders `request` asks for.
    func placeholders(_ request: PlaceholderRequest) -> Placeholders {
        var p = Placeholders()
        if request.kinds.contains(.blurhash) { p.blurhash = BlurHash.encode(self, x: request.blurhashX, y: request.blurhashY) }
        if request.kinds.contains(.thumbhash) { p.thumbhash = Data(ThumbHash.encode(self)).base64EncodedString() }
        if request.kinds.contains(.dominant_color) { p.dominantColor = DominantColor.of(self) }
        return p
    }
}
