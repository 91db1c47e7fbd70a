import HalcyonRuntime

/// Where a store keeps what, the same on a disk (`DiskStore`, relative to its root) and in a
/// bucket (`ObjectStore`, relative to its prefix): objects named by their SHA-256 under
/// `objects/`, two levels of fan-out; key records under `keys/`, named by the SHA-256 of the
/// key; downloaded originals under `originals/`, named by the SHA-256 of their URL; an isolated
/// queue's keys scoped by its name. The one place that names the directories and the fan-out:
/// the stores, their sweepers and verifiers, `halcyon show` and the dashboard ask it.
public enum StoreLayout {
    /// One kind of entry, under a directory of its own (a prefix in a bucket), below a fan-out
    /// of two hex digits of the entry's digest per level.
    public enum Area: Sendable, CaseIterable {
        /// Results' bytes: `objects/ab/cd/<sha256>.<ext>`.
        case objects
        /// Key records: `keys/ab/<sha256(key)>`.
        case keys
        /// Downloaded originals: `originals/ab/<sha256(url)>`.
        case originals

        /// The directory's name: `objects`, `keys`, `originals`.
        public var directory: String {
            switch self {
            case .objects: "objects"
            case .keys: "keys"
            case .originals: "originals"
            }
        }

        /// The directory as a bucket's prefix: its name and a `/`.
        public var prefix: String { directory + "/" }

        /// Levels of fan-out below the directory: two for objects (`ab/cd/`), one for the others (`ab/`).
        public var fanOut: Int { self == .objects ? 2 : 1 }

        /// How many directory levels below the area's own directory its files are (a walk's depth).
        public var depth: Int { fanOut + 1 }

        /// The relative path of the entry named `name` whose digest is `digest`: the area's
        /// directory, `fanOut` levels of two of the digest's hex digits, the name.
        func path(digest: String, name: String) -> String {
            var path = directory
            var digits = Substring(digest)
            for _ in 0..<fanOut {
                path += "/" + digits.prefix(2)
                digits = digits.dropFirst(2)
            }
            return path + "/" + name
        }
    }

    /// Where a disk store's writers make their temp files (then renamed into place); a bucket
    /// has none.
    public static let tmpDirectory = "tmp"

    /// The relative path of an object: `objects/ab/cd/abcd….ext`.
    public static func objectPath(digest: String, ext: String) -> String {
        Area.objects.path(digest: digest, name: "\(digest).\(ext)")
    }

    /// The digest an object's path (or file name) says it has: `<digest>` of
    /// `objects/ab/cd/<digest>.<ext>`.
    public static func digest<S: StringProtocol>(ofObjectPath path: S) -> String {
        let name = path.lastIndex(of: "/").map { path[path.index(after: $0)...] } ?? path[...]
        return String(name.prefix { $0 != "." })
    }

    /// Whether `path` is a relative path under the objects' directory (what a key record may name).
    public static func isObjectPath<S: StringProtocol>(_ path: S) -> Bool {
        path.hasPrefix(Area.objects.prefix) && !path.contains("..")
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
        return Area.keys.path(digest: digest, name: digest)
    }

    /// The relative path of the original downloaded from `url`: `originals/ab/ab….` (the
    /// SHA-256 of the URL).
    public static func originalPath(for url: String) -> String {
        let digest = Digest.sha256Hex(url)
        return Area.originals.path(digest: digest, name: digest)
    }

    /// Whether `text` is a content address: 64 lower-case hex digits.
    public static func isDigest(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }
}
