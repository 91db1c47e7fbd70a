import Foundation
import HalcyonCore

extension DiskStore {
    /// A stored result's bytes, read by its content address.
    public struct ObjectFile: Sendable {
        public var data: Data
        public var format: ImageFormat
        /// The object's expiry (its mtime).
        public var expires: Date
    }

    /// Whether `text` is a content address: 64 lower-case hex digits.
    public static func isDigest(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// The object whose SHA-256 is `digest`, read without moving its access time where this
    /// process may (the store's owner, or root). Nil when `digest` is not a content address,
    /// when no object has it, or when it is over `maxBytes`. The path is built from the digest
    /// and the closed set of image extensions only, and a symlink there is not followed, so
    /// nothing outside the store's `objects/` can be read this way.
    public func object(digest: String, maxBytes: Int) -> ObjectFile? {
        guard Self.isDigest(digest) else { return nil }
        for format in ImageFormat.allCases {
            let path = url(forRelativePath: Self.objectPath(digest: digest, ext: format.fileExtension)).path
            var fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOATIME)
            if fd < 0 && errno == EPERM { fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
            guard fd >= 0 else { continue }
            defer { close(fd) }
            var st = stat()
            guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, Int(st.st_size) <= maxBytes,
                let data = readWhole(fd, limit: maxBytes)
            else { return nil }
            return ObjectFile(data: data, format: format, expires: FileTimes(st).expires)
        }
        return nil
    }
}
