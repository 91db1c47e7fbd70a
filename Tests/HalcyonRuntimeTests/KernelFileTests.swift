import Foundation
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// Kernel-generated files are read whole, however many pages they take.
@Suite struct KernelFileTests {
    /// `/proc/net/unix` with 400 more sockets than usual (about 25 KB; Foundation's
    /// `String(contentsOfFile:)` returns its first 4 KB page only): every one of this
    /// process's socket inodes is in what `KernelFile` reads.
    @Test func aProcFileOfManyPagesIsReadWhole() throws {
        let sockets = try HeldSockets(pairs: 200)
        defer { sockets.close() }
        let ours = try sockets.inodes()
        let text = try #require(KernelFile.text("/proc/net/unix"))
        // Num RefCount Protocol Flags Type St Inode [Path]
        let listed = Set(text.split(separator: "\n").dropFirst().compactMap { $0.split(separator: " ").dropFirst(6).first.map(String.init) })
        #expect(ours.count == 400)
        #expect(ours.isSubset(of: listed), "\(ours.subtracting(listed).count) of this process's sockets missing")
        #expect(text.utf8.count > 3 * 4096, "more than one page")
    }

    @Test func aMissingFileIsNil() {
        #expect(KernelFile.text("/proc/self/no-such-file") == nil)
    }
}
