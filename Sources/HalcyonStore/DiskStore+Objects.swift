import Foundation
import HalcyonDomain

extension DiskStore {
    /// Whether `text` is a content address: 64 lower-case hex digits.
    public static func isDigest(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// The object whose SHA-256 is `digest`, read without moving its access time where this
    /// process may (the store's owner, or root). Nil when `digest` is not a content address,
    /// when no object has it, or when it is over `maxBytes`.
    public func object(digest: String, maxBytes: Int) -> ObjectFile? {
        openObject(digest) { fd, info in
            guard info.bytes <= maxBytes, let data = readWhole(fd, limit: maxBytes) else { return nil }
            return ObjectFile(data: data, format: info.format, expires: info.expires)
        }
    }

    /// The format, size and expiry of the object whose SHA-256 is `digest`, from its inode alone.
    public func objectInfo(digest: String) -> ObjectInfo? {
        openObject(digest) { _, info in info }
    }

    /// Opens the object named by `digest`. The path is built from the digest and the closed set
    /// of image extensions only, and a symlink there is not followed: nothing outside the
    /// store's `objects/` is reachable this way, and only a regular file is handed to `body`.
    private func openObject<T>(_ digest: String, _ body: (_ fd: Int32, _ info: ObjectInfo) -> T?) -> T? {
        guard Self.isDigest(digest) else { return nil }
        for format in ImageFormat.allCases {
            let fd = openForReading(url(forRelativePath: Self.objectPath(digest: digest, ext: format.fileExtension)).path, flags: O_NOFOLLOW)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            var st = stat()
            guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
            return body(fd, ObjectInfo(format: format, bytes: Int(st.st_size), expires: FileTimes(st).expires))
        }
        return nil
    }
}
