import Foundation
import HalcyonCore
import HalcyonTestSupport
import Synchronization
import Testing

@Suite struct ThreadPoolTests {
    /// What the items of a run saw.
    final class Record: Sendable {
        let starts = Mutex<[Double]>([])
        let running = Atomic<Int>(0)
        let peak = Atomic<Int>(0)
    }

    /// Submits `n` items that each block for `seconds` (all from this thread, at once) and
    /// waits for them. `starts` holds each item's wait between its submission and its start.
    func run(_ pool: ThreadPool, _ n: Int, blocking seconds: Double) async -> Record {
        let record = Record(), done = DispatchGroup()
        for _ in 0..<n {
            let submitted = Date()
            done.enter()
            pool.submit {
                record.starts.withLock { $0.append(Date().timeIntervalSince(submitted)) }
                let now = record.running.add(1, ordering: .relaxed).newValue
                _ = record.peak.max(now, ordering: .relaxed)
                usleep(UInt32(seconds * 1e6))
                record.running.subtract(1, ordering: .relaxed)
                done.leave()
            }
        }
        await withCheckedContinuation { (k: CheckedContinuation<Void, Never>) in done.notify(queue: .global()) { k.resume() } }
        return record
    }

    /// Sixteen items that block for half a second all start at once (a Dispatch concurrent
    /// queue on Linux starts 3 and adds about one a second: ~3 s for these).
    @Test func blockedItemsDoNotWaitForAThread() async throws {
        let pool = ThreadPool(name: "test.pool", idleTimeout: 1)
        let record = await run(pool, 16, blocking: 0.5)
        let latest = record.starts.withLock { $0.max() ?? 99 }
        #expect(record.starts.withLock { $0.count } == 16)
        #expect(latest < 1, "an item waited \(latest) s for a thread")
        #expect(record.peak.load(ordering: .relaxed) == 16)
        // Idle threads end after the idle timeout; the pool starts new ones when needed.
        #expect(try await waitUntil(10) { pool.threadCount == 0 })
        let again: Int = await withCheckedContinuation { k in pool.submit { k.resume(returning: 7) } }
        #expect(again == 7)
    }

    @Test func theCapHolds() async {
        let pool = ThreadPool(name: "test.pool.capped", maxThreads: 2)
        let record = await run(pool, 12, blocking: 0.02)
        #expect(record.starts.withLock { $0.count } == 12)
        #expect(record.peak.load(ordering: .relaxed) <= 2)
        #expect(pool.threadCount <= 2)
    }

    /// A pool thread's work may submit more work without deadlocking.
    @Test func workMaySubmitWork() async {
        let pool = ThreadPool(name: "test.pool.nested")
        let value: Int = await withCheckedContinuation { k in
            pool.submit { pool.submit { k.resume(returning: 42) } }
        }
        #expect(value == 42)
    }
}
