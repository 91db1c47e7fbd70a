import Foundation
import HalcyonDomain

/// `O_NOATIME` (Linux): reading does not move the file's atime. Glibc's Swift overlay leaves it
/// out (it is a `_GNU_SOURCE` name); the value is the same on x86_64 and aarch64.
let O_NOATIME: Int32 = 0o1000000

/// Runs `body` on `path` opened and `flock`ed exclusively, once it is certain the open file is
/// still the one at `path` (not removed or replaced while we waited for the lock). Returns nil
/// when nothing is at `path`.
///
/// Every change of a store file's times and every removal by the sweeper go through here, so a
/// check and the change it justifies are never separated by another process's change: a
/// sweeper can't delete an object a writer has just given a new expiry, and a writer can't
/// extend an object the sweeper has just deleted (it finds it gone and writes it again).
/// Opened with `O_NOATIME` where allowed (owner or root), so reading a key does not move its atime.
func withLockedFile<T>(_ path: String, _ body: (_ fd: Int32, _ status: stat) throws(HalcyonError) -> T) throws(HalcyonError) -> T? {
    for _ in 0..<5 {
        let fd = openForReading(path)
        if fd < 0 {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw HalcyonError(.writeFailed, "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw HalcyonError(.writeFailed, "cannot lock \(path): \(String(cString: strerror(errno)))") }
        }
        var held = stat(), current = stat()
        guard fstat(fd, &held) == 0 else { throw HalcyonError(.writeFailed, "cannot stat \(path): \(String(cString: strerror(errno)))") }
        if lstat(path, &current) != 0 {
            if errno == ENOENT { return nil }
            throw HalcyonError(.writeFailed, "cannot stat \(path): \(String(cString: strerror(errno)))")
        }
        // Replaced while we waited (a key rewritten): try again with the new file.
        guard held.st_ino == current.st_ino, held.st_dev == current.st_dev else { continue }
        return try body(fd, held)
    }
    return nil
}

/// Reads an open file whole with `pread` (the offset is not moved); nil on an error, a short
/// read, or a file over `limit` bytes.
func readWhole(_ fd: Int32, limit: Int = .max) -> Data? {
    var st = stat()
    guard fstat(fd, &st) == 0, Int(st.st_size) <= limit else { return nil }
    var data = Data(count: Int(st.st_size))
    var total = 0
    let ok = data.withUnsafeMutableBytes { raw -> Bool in
        while total < raw.count {
            let n = pread(fd, raw.baseAddress! + total, raw.count - total, off_t(total))
            if n < 0 { if errno == EINTR { continue }; return false }
            if n == 0 { break }
            total += n
        }
        return true
    }
    return ok && total == data.count ? data : nil
}

/// Opens `path` read-only with `O_NOATIME` where allowed (the file's owner, or root), else
/// plainly; -1 with errno on failure. `flags` adds to `O_RDONLY | O_CLOEXEC` (e.g. `O_NOFOLLOW`).
func openForReading(_ path: String, flags: Int32 = 0) -> Int32 {
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOATIME | flags)
    return fd < 0 && errno == EPERM ? open(path, O_RDONLY | O_CLOEXEC | flags) : fd
}
