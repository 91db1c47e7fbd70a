import Foundation
import HalcyonCore

/// The store's one way of writing a file: into a temp file on the same filesystem, fsynced,
/// renamed into place, directory fsynced. No reader ever sees a partial file at `final`;
/// on any failure the temp file is removed and `store.write_failed` thrown.
enum AtomicFile {
    /// `prepare` runs on the temp file's descriptor before the rename (e.g. to set its times).
    static func write(_ data: Data, to final: URL, tmpDirectory: URL,
                      prepare: (Int32) -> Void = { _ in }) throws(HalcyonError) {
        let directory = final.deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: tmpDirectory, withIntermediateDirectories: true)
        } catch {
            throw HalcyonError(.writeFailed, "cannot create \(directory.path): \(error.localizedDescription)")
        }
        let tmp = tmpDirectory.appendingPathComponent("\(final.lastPathComponent).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).part")
        let fd = open(tmp.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw HalcyonError(.writeFailed, "cannot create a temp file in \(tmpDirectory.path): \(String(cString: strerror(errno)))")
        }
        var failure: Int32 = 0
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                offset += n
            }
        }
        if failure == 0 { prepare(fd) }
        if failure == 0, fsync(fd) != 0 { failure = errno }
        close(fd)
        if failure == 0, rename(tmp.path, final.path) != 0 { failure = errno }
        if failure != 0 {
            unlink(tmp.path)
            throw HalcyonError(.writeFailed, "writing \(data.count) bytes to \(final.lastPathComponent) failed: \(String(cString: strerror(failure)))")
        }
        let dfd = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dfd >= 0 else { throw HalcyonError(.writeFailed, "cannot open \(directory.path): \(String(cString: strerror(errno)))") }
        defer { close(dfd) }
        if fsync(dfd) != 0 {
            throw HalcyonError(.writeFailed, "fsync of \(directory.path) failed: \(String(cString: strerror(errno)))")
        }
    }
}
