import HalcyonRuntime
import Synchronization
import Testing

/// The lanes of `AsyncSemaphore`: lanes with waiters take turns, each lane first come, first
/// served — a lane arriving behind another's long line waits one turn.
struct AsyncSemaphoreTests {
    final class Order: Sendable {
        let granted = Mutex<[String]>([])
        func append(_ s: String) { granted.withLock { $0.append(s) } }
        var count: Int { granted.withLock { $0.count } }
        var all: [String] { granted.withLock { $0 } }
    }

    /// Queues `count` waiters in `lane`, one after another (each in line before the next starts),
    /// recording the order they are granted in.
    func line(_ slots: AsyncSemaphore, _ lane: String, _ count: Int, into order: Order) async -> [Task<Void, Never>] {
        var tasks: [Task<Void, Never>] = []
        for i in 0..<count {
            let before = slots.waiting
            tasks.append(
                Task {
                    _ = await slots.wait(lane: lane)
                    order.append("\(lane)\(i)")
                })
            while slots.waiting == before { await Task.yield() }
        }
        return tasks
    }

    @Test func lanesTakeTurnsAndEachLaneIsFirstComeFirstServed() async throws {
        let slots = AsyncSemaphore(1)
        #expect(await slots.wait())
        let order = Order()
        var tasks = await line(slots, "a", 4, into: order)
        tasks += await line(slots, "b", 2, into: order)
        for _ in 0..<6 {
            let before = order.count
            slots.signal()
            while order.count == before { await Task.yield() }
        }
        for task in tasks { await task.value }
        #expect(order.all == ["a0", "b0", "a1", "b1", "a2", "a3"])
    }

    @Test func oneLaneIsFIFO() async throws {
        let slots = AsyncSemaphore(1)
        #expect(await slots.wait())
        let order = Order()
        let tasks = await line(slots, "", 3, into: order)
        for _ in 0..<3 {
            let before = order.count
            slots.signal()
            while order.count == before { await Task.yield() }
        }
        for task in tasks { await task.value }
        #expect(order.all == ["0", "1", "2"])
    }
}
