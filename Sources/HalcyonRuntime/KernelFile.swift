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
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                return nil
            }
            guard bytes.count + n <= limit else { return nil }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
