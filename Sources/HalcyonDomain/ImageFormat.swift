/// The image formats Halcyon reads and writes, as identified by magic bytes. Only these ever
/// reach ImageMagick; the sniffed format also names the decoder, so bytes cannot pick their own.
/// JPEG XL is written only (by libjxl): `sniff` does not take it as a source.
public enum ImageFormat: String, Sendable, CaseIterable {
    case jpeg, png, gif, webp, avif, heic, tiff, bmp, jxl

    /// The file extension used in the store.
    public var fileExtension: String {
        switch self {
        case .jpeg: "jpg"
        case .tiff: "tif"
        default: rawValue
        }
    }

    /// Whether Halcyon decodes it (every format but JPEG XL, which it only writes).
    public var isDecoded: Bool { self != .jxl }

    /// The formats decoded, for messages: `JPEG, PNG, GIF, WebP, AVIF, HEIC, TIFF and BMP`.
    public static let supportedNames = "JPEG, PNG, GIF, WebP, AVIF, HEIC, TIFF and BMP"

    /// Whether an output in this format keeps every frame of an animation.
    public var animates: Bool { self == .gif || self == .webp }

    /// ImageMagick's coder name.
    public var magickName: String { rawValue.uppercased() }

    /// Identifies an output's `bytes`: `sniff`'s formats and JPEG XL (a bare codestream or the
    /// ISO BMFF container).
    public static func sniffOutput(_ bytes: some Collection<UInt8>) -> ImageFormat? {
        sniff(bytes) ?? (isJPEGXL(Array(bytes.prefix(12))) ? .jxl : nil)
    }

    private static func isJPEGXL(_ b: [UInt8]) -> Bool {
        b.starts(with: [0xFF, 0x0A]) || b.starts(with: [0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A])
    }

    /// Identifies a source's `bytes` by their magic numbers: the formats Halcyon decodes; nil
    /// for anything else.
    public static func sniff(_ bytes: some Collection<UInt8>) -> ImageFormat? {
        let b = Array(bytes.prefix(32))
        func starts(_ magic: [UInt8], at offset: Int = 0) -> Bool {
            b.count >= offset + magic.count && Array(b[offset..<offset + magic.count]) == magic
        }
        if starts([0xFF, 0xD8, 0xFF]) { return .jpeg }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { return .gif }
        if starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8) { return .webp }
        if starts(Array("ftyp".utf8), at: 4), b.count >= 12 {
            let brand = String(decoding: b[8..<12], as: UTF8.self)
            if ["avif", "avis"].contains(brand) { return .avif }
            if ["heic", "heix", "hevc", "hevx", "mif1", "msf1"].contains(brand) { return .heic }
        }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) { return .tiff }
        if starts(Array("BM".utf8)), b.count >= 26 { return .bmp }
        return nil
    }

    /// The name of a raster image format Halcyon recognises but does not decode (its ImageMagick
    /// coder is off by policy, or absent), from magic bytes — so that such a file fails as an
    /// unsupported image, not as something that is not an image at all. Nil for anything else,
    /// documents and vector formats included (PDF, PostScript, SVG: not images here).
    public static func unsupportedName(_ bytes: some Collection<UInt8>, last: some Collection<UInt8> = [UInt8]()) -> String? {
        let b = Array(bytes.prefix(32))
        func starts(_ magic: [UInt8], at offset: Int = 0) -> Bool {
            b.count >= offset + magic.count && Array(b[offset..<offset + magic.count]) == magic
        }
        func text(_ s: String, at offset: Int = 0) -> Bool { starts(Array(s.utf8), at: offset) }
        if text("8BPS") { return "PSD (Photoshop)" }
        if starts([0x01, 0xDA]) { return "SGI" }
        if text("gimp xcf") { return "XCF (GIMP)" }
        if starts([0x00, 0x00, 0x01, 0x00]) && b.count >= 6 && b[4] > 0 { return "ICO (Windows icon)" }
        if starts([0x00, 0x00, 0x02, 0x00]) && b.count >= 6 && b[4] > 0 { return "CUR (Windows cursor)" }
        if starts([0x0A]) && b.count >= 4 && [0, 2, 3, 4, 5].contains(b[1]) && b[2] == 1 && [1, 2, 4, 8].contains(b[3]) { return "PCX" }
        if starts([0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20]) || starts([0xFF, 0x4F, 0xFF, 0x51]) { return "JPEG 2000" }
        if isJPEGXL(b) { return "JPEG XL" }
        if starts([0x76, 0x2F, 0x31, 0x01]) { return "OpenEXR" }
        if text("DDS ") { return "DDS" }
        if text("qoif") { return "QOI" }
        if text("#?RADIANCE") || text("#?RGBE") { return "Radiance HDR" }
        if text("SIMPLE  =") { return "FITS" }
        if text("SDPX") || text("XPDS") { return "DPX" }
        if starts([0x80, 0x2A, 0x5F, 0xD7]) { return "Cineon" }
        if b.count >= 3, b[0] == UInt8(ascii: "P"), (UInt8(ascii: "1")...UInt8(ascii: "7")).contains(b[1]),
            [0x20, 0x09, 0x0A, 0x0D].contains(b[2])
        {
            return "Netpbm (P\(Character(UnicodeScalar(b[1]))))"
        }
        // TGA has no magic at its start; version 2 files end with this footer.
        if Array(last.suffix(18)) == Array("TRUEVISION-XFILE.".utf8) + [0] { return "TGA" }
        return nil
    }
}
