import Foundation

/// Reads the kernel's generated files (`/proc`, cgroup files) whole.
///
/// These files report a size of 0 and are produced a page at a time; Foundation's
/// `String(contentsOfFile:)` returns only the first page of one that is longer (4 KB of
/// `/proc/net/unix` on a machine with a few thousand sockets), silently. This reads until
/// end of file.
public enum KernelFile {
    /// The most read from one file: `/proc/net/unix` with 100,000 sockets is about 25 MB.
    public static let limit = 64 << 20

    /// The file's text, or nil when it cannot be opened or read, is longer than `limit`, or
    /// is not UTF-8.
    public static func text(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        // Into a buffer on the stack: the supervisor reads its child's status at every look.
        let complete = withUnsafeTemporaryAllocation(byteCount: 16 << 10, alignment: 16) { chunk -> Bool in
            while true {
                let n = read(fd, chunk.baseAddress, chunk.count)
                if n == 0 { return true }
                if n < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                guard bytes.count + n <= limit else { return false }
                bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[0..<n]))
            }
        }
        return complete ? String(validating: bytes, as: UTF8.self) : nil
    }
}
