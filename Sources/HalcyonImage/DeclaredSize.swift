import Foundation
import HalcyonChain
import HalcyonDomain

/// What an image's own bytes say before ImageMagick reads them. The declared dimensions
/// (PNG's IHDR, GIF's logical screen, JPEG's first SOF): a pixel bomb (100000×100000 in a few
/// bytes) is refused with `image.too_large` before any coder runs; formats not read here (and
/// malformed headers) are left to ImageMagick's ping and its policy limits. And whether a JPEG
/// is whole: libjpeg "decodes" a truncated one (grey below the cut) with only a warning.
package enum DeclaredSize {
    /// The width and height the header of an image of `format` declares (PNG, GIF, JPEG), nil
    /// for other formats and headers not laid out as expected.
    package static func of(_ data: Data, format: ImageFormat) -> (width: Int, height: Int)? {
        let b = [UInt8](data.prefix(64 * 1024))
        func be16(_ i: Int) -> Int { i + 1 < b.count ? Int(b[i]) << 8 | Int(b[i + 1]) : 0 }
        func be32(_ i: Int) -> Int { i + 3 < b.count ? be16(i) << 16 | be16(i + 2) : 0 }
        switch format {
        case .png:
            guard b.count >= 24, b[12...15].elementsEqual(Array("IHDR".utf8)) else { return nil }
            return (be32(16), be32(20))
        case .gif:
            guard b.count >= 10 else { return nil }
            return (Int(b[6]) | Int(b[7]) << 8, Int(b[8]) | Int(b[9]) << 8)
        case .jpeg:
            return jpegFrameHeader(b).map { (be16($0 + 7), be16($0 + 5)) }
        default:
            return nil
        }
    }

    /// A JPEG's sample precision in bits (its first SOF's P field: 8, or 12 and 16 for the
    /// extended and lossless processes), nil when no frame header is found in the first 64 KiB.
    package static func jpegPrecision(_ data: Data) -> Int? {
        let b = [UInt8](data.prefix(64 * 1024))
        return jpegFrameHeader(b).map { Int(b[$0 + 4]) }
    }

    /// A JPEG's chroma sampling, from its first SOF's components (one: grey; three, chroma at
    /// 1×1: the luma's factors say which); nil when no frame header is found in the first 64 KiB
    /// or its sampling is none of `ChromaSampling`'s.
    package static func jpegChroma(_ data: Data) -> ChromaSampling? {
        let b = [UInt8](data.prefix(64 * 1024))
        guard let sof = jpegFrameHeader(b) else { return nil }
        let components = Int(b[sof + 9])
        guard components == 1 || components == 3, sof + 10 + 3 * components <= b.count else { return nil }
        if components == 1 { return .grey }
        let factors = { (c: Int) in b[sof + 10 + 3 * c + 1] }
        guard factors(1) == 0x11, factors(2) == 0x11 else { return nil }
        return ChromaSampling(lumaH: Int(factors(0) >> 4), lumaV: Int(factors(0) & 0x0F))
    }

    /// Where a JPEG's first start-of-frame marker is (SOF0–SOF15 but DHT, JPG and DAC), the marker
    /// segments before it walked by their lengths, its fixed fields (to the component count at
    /// +9) within `b`; nil when there is none.
    private static func jpegFrameHeader(_ b: [UInt8]) -> Int? {
        guard b.count > 2, b[0] == 0xFF, b[1] == 0xD8 else { return nil }
        var i = 2
        while i + 9 < b.count, b[i] == 0xFF {
            let marker = b[i + 1]
            if marker == 0xFF { i += 1; continue }
            if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) { return i }
            i += 2 + (Int(b[i + 2]) << 8 | Int(b[i + 3]))
        }
        return nil
    }

    /// A GIF's logical screen and every frame's own size, read by walking its blocks (no
    /// pixel is decoded): a GIF whose first frame is 1×1 can declare huge later frames, and one
    /// of 5,000 frames must be refused before a coder allocates a list of them. Stops after
    /// `maxFrames + 1` frames (enough to know there are too many); nil when the bytes are not
    /// laid out as this walk expects (ImageMagick's ping then decides).
    package static func gifFrames(_ data: Data, maxFrames: Int) -> (canvas: ImageSize, frames: [ImageSize])? {
        data.withUnsafeBytes { (b: UnsafeRawBufferPointer) -> (canvas: ImageSize, frames: [ImageSize])? in
            func le16(_ i: Int) -> Int { Int(b[i]) | Int(b[i + 1]) << 8 }
            guard b.count >= 13 else { return nil }
            let canvas = ImageSize(width: le16(6), height: le16(8))
            var i = 13
            if b[10] & 0x80 != 0 { i += 3 << ((Int(b[10]) & 7) + 1) }
            /// Skips data sub-blocks (a size byte, that many bytes) up to the empty one.
            func skipSubBlocks(_ j: inout Int) -> Bool {
                while j < b.count {
                    let n = Int(b[j])
                    j += 1 + n
                    if n == 0 { return true }
                }
                return false
            }
            var frames: [ImageSize] = []
            while i < b.count, frames.count <= maxFrames {
                switch b[i] {
                case 0x3B:
                    return (canvas, frames)
                case 0x21:  // extension: label, then sub-blocks
                    i += 2
                    guard skipSubBlocks(&i) else { return frames.isEmpty ? nil : (canvas, frames) }
                case 0x2C:  // image descriptor
                    guard i + 10 <= b.count else { return frames.isEmpty ? nil : (canvas, frames) }
                    frames.append(ImageSize(width: le16(i + 5), height: le16(i + 7)))
                    let flags = Int(b[i + 9])
                    i += 10
                    if flags & 0x80 != 0 { i += 3 << ((flags & 7) + 1) }
                    i += 1  // LZW minimum code size
                    guard skipSubBlocks(&i) else { return (canvas, frames) }
                default:
                    return frames.isEmpty ? nil : (canvas, frames)
                }
            }
            return frames.isEmpty ? nil : (canvas, frames)
        }
    }

    /// False when a JPEG's scan data never reaches an end-of-image marker (a truncated file).
    /// After the first top-level SOS, entropy-coded data escapes every 0xFF (0xFF00 or RSTn),
    /// so 0xFFD9 there can only be the EOI; markers before it (APPn with EXIF thumbnails)
    /// are skipped by their lengths.
    package static func jpegIsWhole(_ data: Data) -> Bool {
        data.withUnsafeBytes { (b: UnsafeRawBufferPointer) -> Bool in
            // The usual case, without a walk: the file ends with its EOI.
            if b.count >= 4, b[b.count - 2] == 0xFF, b[b.count - 1] == 0xD9 { return true }
            func be16(_ i: Int) -> Int { i + 1 < b.count ? Int(b[i]) << 8 | Int(b[i + 1]) : 0 }
            var i = 2
            while i + 3 < b.count, b[i] == 0xFF {
                let marker = b[i + 1]
                if marker == 0xFF { i += 1; continue }
                if marker == 0xDA {
                    var j = i + 2 + be16(i + 2)
                    while j + 1 < b.count {
                        if b[j] == 0xFF && b[j + 1] == 0xD9 { return true }
                        j += 1
                    }
                    return false
                }
                i += 2 + be16(i + 2)
            }
            return true  // not a layout this check understands: ImageMagick decides
        }
    }
}
