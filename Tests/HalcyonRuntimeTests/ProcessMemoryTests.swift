import Foundation
import HalcyonRuntime
import Testing

/// The allocator setting behind `halcyon work --mmap-threshold`. Whether a given block then
/// comes from a mapping depends on what the heap already has free (glibc serves a request from
/// the heap's top or its bins when it can), so this only checks that glibc takes the value; its
/// effect is the bench's to measure (W1's peak RSS), and `WorkerTests` checks the worker sets it.
@Suite struct ProcessMemoryTests {
    @Test func glibcTakesAnMmapThreshold() {
        #expect(ProcessMemory.setMmapThreshold(4 << 20))
    }

    @Test func peakRSSIsReadForThisProcess() {
        #expect((ProcessMemory.peakRSS(of: getpid()) ?? 0) > 1 << 20)
    }
}
