import Foundation

/// A PDQ hash (Meta's perceptual hash: 256 bits, and a quality) of an image's pixels
/// (computed in HalcyonImage by `pdq.c`). Two pictures whose hashes differ in at most 31 bits
/// are, by Meta's figures, the same picture (re-encoded, resized, lightly edited); a quality
/// under 50 means the picture has too little detail for the hash to say much.
public struct PerceptualHash: Sendable, Equatable {
    /// 64 lowercase hex digits, as the reference prints its hashes.
    public var hex: String
    /// 0–100.
    public var quality: Int

    /// A hash from its text, held to the format (64 lowercase hex digits, quality 0–100); nil
    /// for anything else.
    public init?(hex: some StringProtocol, quality: Int) {
        guard hex.utf8.count == 64, hex.utf8.allSatisfy({ Self.hexValue($0) != nil }), (0...100).contains(quality) else { return nil }
        self.hex = String(hex)
        self.quality = quality
    }

    /// The distance under which two hashes are the same picture, by Meta's figures.
    public static let matchDistance = 31
    /// The quality under which a hash is unreliable, by Meta's figures.
    public static let reliableQuality = 50

    /// The eight dihedral variants, in `pdq.h`'s order: the hashes the image would have turned
    /// a quarter anticlockwise (PDQ's rotate90), half and three quarters, mirrored top-bottom
    /// (flipX) and left-right (flipY), and across either diagonal.
    public enum Variant: Int, CaseIterable, Sendable {
        case original, rotate90, rotate180, rotate270, flipX, flipY, flipPlus1, flipMinus1
    }

    /// The number of bits two hashes (64 hex digits each) differ in; nil when either is not one.
    public static func distance(_ a: String, _ b: String) -> Int? {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == 64, y.count == 64 else { return nil }
        var bits = 0
        for (p, q) in zip(x, y) {
            guard let u = hexValue(p), let v = hexValue(q) else { return nil }
            bits += (u ^ v).nonzeroBitCount
        }
        return bits
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}

/// What a job's `perceptual_hash` option asks for.
public enum PerceptualHashRequest: String, Sendable, Equatable {
    /// The source's hash (`true`, `"source"`).
    case source
    /// The source's and the output's (`"output"`).
    case output
    /// The source's and its seven other dihedral variants (`"dihedral"`).
    case dihedral

    /// How many of the source's dihedral hashes it asks for: 1, or 8 for `dihedral`.
    public var sourceVariants: Int { self == .dihedral ? 8 : 1 }
}
