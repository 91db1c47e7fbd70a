import Foundation
import HalcyonCore

/// Where a stored object lives and what it is.
public struct StoredObject: Sendable, Equatable {
    /// SHA-256 hex of the bytes.
    public var digest: String
    /// Path relative to the store root: `objects/ab/cd/<digest>.<ext>`.
    public var path: String
    public var bytes: Int
    /// True when the object was already there (nothing was written).
    public var existed: Bool
}

/// The content-addressed disk store (ARCHITECTURE.md §6). Objects are immutable and named by
/// their SHA-256; each is written to a temp file under `tmp/` on the same filesystem, fsynced,
/// renamed into place and its directory fsynced, so no reader ever sees a partial file at a
/// final path and two workers writing the same bytes is harmless.
public struct DiskStore: Sendable {
    public let root: URL

    public init(root: URL) {
        self.root = root.standardizedFileURL
    }

    /// The relative path of an object.
    public static func objectPath(digest: String, ext: String) -> String {
        let d = Array(digest)
        return "objects/\(String(d[0..<2]))/\(String(d[2..<4]))/\(digest).\(ext)"
    }

    public func url(forRelativePath path: String) -> URL {
        root.appendingPathComponent(path)
    }

    /// Stores `data` as an object with extension `ext` (e.g. `jpg`). Blocking: call from a
    /// Dispatch thread, not the cooperative pool. Throws `store.write_failed`.
    public func put(_ data: Data, ext: String) throws(HalcyonError) -> StoredObject {
        let digest = Digest.sha256Hex(data)
        let relative = Self.objectPath(digest: digest, ext: ext)
        let final = url(forRelativePath: relative)
        if FileManager.default.fileExists(atPath: final.path) {
            return StoredObject(digest: digest, path: relative, bytes: data.count, existed: true)
        }
        try AtomicFile.write(data, to: final, tmpDirectory: root.appendingPathComponent("tmp"))
        return StoredObject(digest: digest, path: relative, bytes: data.count, existed: false)
    }
}
