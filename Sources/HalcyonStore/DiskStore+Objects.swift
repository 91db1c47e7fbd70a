import Foundation
import HalcyonDomain
import Synchronization

extension DiskStore {
    /// The object whose SHA-256 is `digest`, opened without moving its access time where this
    /// process may (the store's owner, or root). Nil when `digest` is not a content address,
    /// when no object has it, or when it is over `maxBytes`. The reader holds the file open: a
    /// sweep or a repair that deletes it meanwhile does not change what it reads (objects are
    /// written whole under a temporary name and renamed, never changed in place). Opened on an
    /// I/O thread; the reader is a `LocalObjectReader`.
    public func openObject(digest: String, maxBytes: Int) async -> (any ObjectReader)? {
        await onIOThread { () -> (any ObjectReader)? in
            guard let (fd, info) = openObjectFile(digest) else { return nil }
            guard info.bytes <= maxBytes else {
                close(fd)
                return nil
            }
            return DiskObjectReader(fd: fd, info: info, path: StoreLayout.objectPath(digest: digest, ext: info.format.fileExtension))
        }
    }

    /// The format, size and expiry of the object whose SHA-256 is `digest`, from its inode alone
    /// (on an I/O thread).
    public func objectInfo(digest: String) async -> ObjectInfo? {
        await onIOThread { () -> ObjectInfo? in
            guard let (fd, info) = openObjectFile(digest) else { return nil }
            close(fd)
            return info
        }
    }

    /// Opens the object named by `digest` (the caller closes the descriptor). The path is built
    /// from the digest and the closed set of image extensions only, and a symlink there is not
    /// followed: nothing outside the store's `objects/` is reachable this way, and only a regular
    /// file is opened (`O_NONBLOCK`: a FIFO planted there does not hold the open).
    private func openObjectFile(_ digest: String) -> (fd: Int32, info: ObjectInfo)? {
        guard StoreLayout.isDigest(digest) else { return nil }
        for format in ImageFormat.allCases {
            let path = url(forRelativePath: StoreLayout.objectPath(digest: digest, ext: format.fileExtension)).path
            let fd = openForReading(path, flags: O_NOFOLLOW | O_NONBLOCK)
            guard fd >= 0 else { continue }
            var st = stat()
            guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
                close(fd)
                return nil
            }
            return (fd, ObjectInfo(format: format, bytes: Int(st.st_size), expires: FileTimes(st).expires))
        }
        return nil
    }
}

/// An object file held open and read with `pread`, a chunk at a time.
final class DiskObjectReader: LocalObjectReader {
    let format: ImageFormat
    let bytes: Int
    let expires: Date
    /// A read is a system call (and a hop to an I/O thread): 256 KiB keeps both cheap.
    let chunkBytes = 256 << 10
    /// The store-relative path, for messages.
    private let path: String
    /// The descriptor; -1 once closed.
    private let fd: Mutex<Int32>

    init(fd: Int32, info: ObjectInfo, path: String) {
        self.format = info.format
        self.bytes = info.bytes
        self.expires = info.expires
        self.path = path
        self.fd = Mutex(fd)
    }

    deinit { close() }

    /// Bytes `range`, read on an I/O thread.
    func read(_ range: Range<Int>) async throws(HalcyonError) -> Data {
        try await onIOThread { () throws(HalcyonError) -> Data in
            var data = Data(count: range.count)
            let failure: HalcyonError? = data.withUnsafeMutableBytes { raw in
                do throws(HalcyonError) {
                    try self.read(range, into: raw)
                    return nil
                } catch {
                    return error
                }
            }
            if let failure { throw failure }
            return data
        }
    }

    func read(_ range: Range<Int>, into buffer: UnsafeMutableRawBufferPointer) throws(HalcyonError) {
        guard range.lowerBound >= 0, range.upperBound <= bytes, buffer.count == range.count else {
            throw HalcyonError(.readFailed, "\(path): bytes \(range) are outside the object's \(bytes) (or the buffer's \(buffer.count))")
        }
        let failure: HalcyonError? = fd.withLock { fd in
            guard fd >= 0 else { return HalcyonError(.readFailed, "\(path): read after the reader was closed") }
            var done = 0
            while done < buffer.count {
                let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(range.lowerBound + done))
                if n < 0 && errno == EINTR { continue }
                if n < 0 { return HalcyonError(.readFailed, "\(path): \(String(cString: strerror(errno)))") }
                if n == 0 { return HalcyonError(.readFailed, "\(path) is shorter than when it was opened (\(bytes) bytes)") }
                done += n
            }
            return nil
        }
        if let failure { throw failure }
    }

    func close() {
        fd.withLock { fd in
            if fd >= 0 { Foundation.close(fd) }
            fd = -1
        }
    }
}
