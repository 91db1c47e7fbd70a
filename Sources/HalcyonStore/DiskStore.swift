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
        let directory = final.deletingLastPathComponent()
        let tmpDir = root.appendingPathComponent("tmp")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: tmpDir, withIntermediateDirectories: true)
        } catch {
            throw HalcyonError(.writeFailed, "cannot create \(directory.path): \(error.localizedDescription)")
        }
        let tmp = tmpDir.appendingPathComponent("\(digest).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).part")
        try writeDurably(data, to: tmp)
        if rename(tmp.path, final.path) != 0 {
            let e = errno
            unlink(tmp.path)
            throw HalcyonError(.writeFailed, "rename into \(relative) failed: \(String(cString: strerror(e)))")
        }
        try syncDirectory(directory)
        return StoredObject(digest: digest, path: relative, bytes: data.count, existed: false)
    }

    /// Writes and fsyncs `data` to `url`; on any failure removes the partial file.
    private func writeDurably(_ data: Data, to url: URL) throws(HalcyonError) {
        let fd = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw HalcyonError(.writeFailed, "cannot create temp file in \(url.deletingLastPathComponent().path): \(String(cString: strerror(errno)))")
        }
        var failure: Int32 = 0
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                offset += n
            }
        }
        if failure == 0, fsync(fd) != 0 { failure = errno }
        close(fd)
        if failure != 0 {
            unlink(url.path)
            throw HalcyonError(.writeFailed, "writing \(data.count) bytes failed: \(String(cString: strerror(failure)))")
        }
    }

    private func syncDirectory(_ directory: URL) throws(HalcyonError) {
        let fd = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw HalcyonError(.writeFailed, "cannot open \(directory.path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        if fsync(fd) != 0 {
            throw HalcyonError(.writeFailed, "fsync of \(directory.path) failed: \(String(cString: strerror(errno)))")
        }
    }
}
