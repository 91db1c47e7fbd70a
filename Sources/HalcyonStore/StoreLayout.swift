import HalcyonRuntime

/// Where a store keeps what, the same on a disk (`DiskStore`, relative to its root) and in a
/// bucket (`ObjectStore`, relative to its prefix): objects named by their SHA-256 under
/// `objects/`, two levels of fan-out; key records under `keys/`, named by the SHA-256 of the
/// key; an isolated queue's keys scoped by its name. `halcyon show` and the dashboard find
/// entries with it too.
public enum StoreLayout {
    /// The relative path of an object: `objects/ab/cd/abcd….ext`.
    public static func objectPath(digest: String, ext: String) -> String {
        let d = Array(digest)
        return "objects/\(String(d[0..<2]))/\(String(d[2..<4]))/\(digest).\(ext)"
    }

    /// The key a result is stored under: `key` itself in the shared key space, or with a scope
    /// (an isolated queue's name) the scope, a NUL and the key. PostgreSQL text never holds a
    /// NUL, so no key a job can carry — in any queue — names a scoped entry.
    public static func storeKey(_ key: String, scope: String?) -> String {
        guard let scope else { return key }
        return scope + "\u{0}" + key
    }

    /// The relative path of a key's record: `keys/ab/ab….` (the SHA-256 of the key).
    public static func keyPath(for key: String) -> String {
        let digest = Digest.sha256Hex(key)
        return "keys/\(digest.prefix(2))/\(digest)"
    }

    /// Whether `text` is a content address: 64 lower-case hex digits.
    public static func isDigest(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }
}
