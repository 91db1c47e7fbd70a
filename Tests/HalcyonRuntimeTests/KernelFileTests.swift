import Foundation
import HalcyonRuntime
import Testing

/// Kernel-generated files are read whole, however many pages they take.
@Suite struct KernelFileTests {
    /// `/proc/net/unix` with 6,000 more sockets than usual (over 400 KB; Foundation's
    /// `String(contentsOfFile:)` returns its first 4 KB page only): every one of this
    /// process's socket inodes is in what `KernelFile` reads.
    @Test func aProcFileOfManyPagesIsReadWhole() throws {
        var fds: [Int32] = []
        defer { for fd in fds { close(fd) } }
        for _ in 0..<3000 {
            var pair: [Int32] = [0, 0]
            try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
            fds += pair
        }
        let ours = Set(
            try fds.map { fd in
                String(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)").dropFirst("socket:[".count).dropLast())
            })
        let text = try #require(KernelFile.text("/proc/net/unix"))
        // Num RefCount Protocol Flags Type St Inode [Path]
        let listed = Set(text.split(separator: "\n").dropFirst().compactMap { $0.split(separator: " ").dropFirst(6).first.map(String.init) })
        #expect(ours.count == 6000)
        #expect(ours.isSubset(of: listed), "\(ours.subtracting(listed).count) of this process's sockets missing")
        #expect(text.utf8.count > 100 * 4096)
    }

    @Test func aMissingFileIsNil() {
        #expect(KernelFile.text("/proc/self/no-such-file") == nil)
    }
}
