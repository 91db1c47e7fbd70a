import Foundation
import HalcyonCore
import Testing

/// The worker's allocator setting (`--mmap-threshold`) takes effect: with a fixed 4 MiB
/// threshold, a larger block is a mapping of its own (glibc marks such a chunk IS_MMAPPED, bit
/// 1 of the size word before the pointer) and a smaller one is not.
@Suite struct ProcessMemoryTests {
    func isMapped(_ bytes: Int) -> Bool {
        let p = malloc(bytes)!
        defer { free(p) }
        return p.load(fromByteOffset: -MemoryLayout<UInt>.size, as: UInt.self) & 2 != 0
    }

    @Test func aFixedMmapThresholdDecidesWhichBlocksAreMapped() {
        #expect(ProcessMemory.setMmapThreshold(4 << 20))
        #expect(isMapped(8 << 20))
        #expect(!isMapped(1 << 20))
    }

    @Test func peakRSSIsReadForThisProcess() {
        #expect((ProcessMemory.peakRSS(of: getpid()) ?? 0) > 1 << 20)
    }
}
