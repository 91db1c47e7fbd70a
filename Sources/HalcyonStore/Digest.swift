internal import CCrypto
import Foundation

/// SHA-256, through OpenSSL's libcrypto (already a dependency of libpq).
public enum Digest {
    /// Lower-case hex SHA-256 of `bytes`.
    public static func sha256Hex(_ bytes: some ContiguousBytes) -> String {
        var out = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBytes { raw in
            _ = SHA256(raw.baseAddress?.assumingMemoryBound(to: UInt8.self), raw.count, &out)
        }
        return hex(out)
    }

    public static func sha256Hex(_ text: String) -> String { sha256Hex(Array(text.utf8)) }

    private static let digits = Array("0123456789abcdef".utf8)

    static func hex(_ bytes: [UInt8]) -> String {
        var chars = [UInt8]()
        chars.reserveCapacity(bytes.count * 2)
        for b in bytes {
            chars.append(digits[Int(b >> 4)])
            chars.append(digits[Int(b & 0xF)])
        }
        return String(decoding: chars, as: UTF8.self)
    }
}
