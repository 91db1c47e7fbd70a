/// The image formats Halcyon reads and writes, as identified by magic bytes. Only these ever
/// reach ImageMagick; the sniffed format also names the decoder, so bytes cannot pick their own.
public enum ImageFormat: String, Sendable, CaseIterable {
    case jpeg, png, gif, webp, avif, heic, tiff, bmp

    /// The file extension used in the store.
    public var fileExtension: String {
        switch self {
        case .jpeg: "jpg"
        case .tiff: "tif"
        default: rawValue
        }
    }

    /// Whether an output in this format keeps every frame of an animation.
    public var animates: Bool { self == .gif || self == .webp }

    /// ImageMagick's coder name.
    public var magickName: String { rawValue.uppercased() }

    /// Identifies `bytes` by their magic numbers; nil for anything else.
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
}
