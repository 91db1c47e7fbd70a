internal import CCrypto
import Foundation

/// SHA-256 and HMAC-SHA256, through OpenSSL's libcrypto (already a dependency of libpq).
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

    /// Lower-case hex HMAC-SHA256 of `message` keyed by `key` (RFC 2104).
    public static func hmacSHA256Hex(key: some ContiguousBytes, message: some ContiguousBytes) -> String {
        hex(hmacSHA256(key: key, message: message))
    }

    /// The 32 bytes of HMAC-SHA256 of `message` keyed by `key` (RFC 2104).
    public static func hmacSHA256(key: some ContiguousBytes, message: some ContiguousBytes) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 32
        key.withUnsafeBytes { k in
            message.withUnsafeBytes { m in
                _ = HMAC(EVP_sha256(), k.baseAddress, Int32(k.count), m.baseAddress?.assumingMemoryBound(to: UInt8.self), m.count, &out, &length)
            }
        }
        return Array(out.prefix(Int(length)))
    }

    private static let digits = Array("0123456789abcdef".utf8)

    /// `bytes` as lower-case hex, two digits a byte.
    package static func hex(_ bytes: [UInt8]) -> String {
        var chars = [UInt8]()
        chars.reserveCapacity(bytes.count * 2)
        for b in bytes {
            chars.append(digits[Int(b >> 4)])
            chars.append(digits[Int(b & 0xF)])
        }
        return String(decoding: chars, as: UTF8.self)
    }
}
