import Dispatch
import Foundation
import HalcyonDomain
import HalcyonFetch
import HalcyonRuntime
import Testing

@testable import HalcyonWorker

/// The pending-bytes budget's policy, on the gate alone: transfers are meters fed by hand (each
/// chunk on a thread of its own where it may be held back), so nothing here depends on a
/// network's speed. A 1,000-byte budget, speed judged over 50 ms windows at 10,000 bytes/s (a
/// transfer that receives nothing for a window is not moving).
struct PendingBytesPolicyTests {
    static func gate(limit: Int = 1000) -> PendingBytes {
        var c = PendingBytes.Configuration(limit: limit)
        c.window = .milliseconds(50)
        c.movingRate = 10_000
        return PendingBytes(configuration: c)
    }

    /// A chunk received on a thread of its own: `wait` says whether it went on within `seconds`.
    final class Chunk: Sendable {
        private let done = DispatchSemaphore(value: 0)

        init(_ meter: any EndableTransferMeter, _ bytes: Int) {
            let done = done
            Thread.detachNewThread {
                _ = meter.received(bytes)
                done.signal()
            }
        }

        /// True once the chunk was let through (within `seconds`).
        func wait(_ seconds: Double) -> Bool { done.wait(timeout: .now() + seconds) == .success }
    }

    /// The oldest transfer under way used to go on alone over the budget, whatever its speed:
    /// an origin that sent most of a body and then dripped held every other transfer until it
    /// ended. Now a transfer that stops moving parks its bytes (within an allowance as big as the
    /// budget), and they no longer count against the ones that move.
    @Test func aStalledOldestTransferDoesNotHoldBackAMovingOne() throws {
        let gate = Self.gate()
        let flag = CancellationFlag()
        let slow = gate.meter(cancel: flag)
        #expect(slow.received(900))
        let fast = gate.meter(cancel: flag)
        // 1,100 bytes held, over the budget: the moving newcomer waits at first, then goes on
        // once the oldest has sent nothing for a window.
        let chunk = Chunk(fast, 200)
        let started = ContinuousClock.now
        let wentOn = chunk.wait(5)
        flag.cancel()
        #expect(wentOn, "the moving transfer was held back behind a stalled one for 5 s")
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(gate.parked == 900)
        #expect(gate.held == 1100)
        slow.end()
        fast.end()
        #expect(gate.held == 0)
    }

    /// Over the budget (bytes waiting for processing fill it), only the privileged transfer goes
    /// on. It used to be the oldest under way; one that stops moving now hands the privilege to
    /// the oldest that moves, and takes its turn behind it.
    @Test func thePrivilegeMovesToATransferThatMoves() throws {
        let gate = Self.gate()
        let flag = CancellationFlag()
        gate.hold(1500)
        let slow = gate.meter(cancel: flag)
        #expect(slow.received(500))  // the only transfer: privileged, over the budget
        let fast = gate.meter(cancel: flag)
        // 2,100 held; with the slow one's 500 parked, 1,600 count: still over the budget, so the
        // fast one goes on only as the privileged one.
        #expect(Chunk(fast, 100).wait(5), "the privilege stayed with the stalled transfer")
        for _ in 0..<20 { #expect(Chunk(fast, 100).wait(5)) }
        // The slow one is held back now: not privileged, over the budget.
        let late = Chunk(slow, 100)
        #expect(!late.wait(0.3))
        // The fast one ends and its body goes to processing (held by its job): the slow one,
        // the only transfer left, goes on.
        fast.end()
        gate.hold(2100)
        #expect(late.wait(5))
        flag.cancel()
        slow.end()
        gate.release(1500)
        gate.release(2100)
        #expect(gate.held == 0)
        // The bound: the budget, the parked allowance, one privileged body and a chunk each.
        #expect(gate.peak <= 2 * gate.limit + 2100 + 2 * 100, "peak \(gate.peak)")
    }

    /// What bounds the memory: parked bytes count against no one only up to an allowance as big
    /// as the budget. Past it they count again, and a stalled privileged transfer keeps the
    /// privilege (handing it on would let one more body in): the others wait until it ends.
    /// Most held at once: about twice the budget, the privileged transfer's body and a chunk per
    /// other transfer.
    @Test func parkedBytesPastTheAllowanceCountAgain() throws {
        let gate = Self.gate()
        let flag = CancellationFlag()
        let slow = gate.meter(cancel: flag)
        for _ in 0..<30 { #expect(slow.received(100)) }
        let fast = gate.meter(cancel: flag)
        let chunk = Chunk(fast, 100)
        // Ten windows and more: the slow one is judged stalled long before, and its 3,000 bytes
        // are parked, but only 1,000 of them count against no one.
        #expect(!chunk.wait(0.6), "a transfer went on while the bytes held were past the budget and its allowance")
        #expect(gate.parked == 3000)
        slow.end()
        #expect(chunk.wait(5))
        flag.cancel()
        fast.end()
        #expect(gate.peak == 3100)
        #expect(gate.peak <= 2 * gate.limit + 3000 + 100)
    }

    /// Time a transfer spends held back is not judged: its clock stands still, so one that was
    /// moving when it was held back is still moving when it may go on, and gets the privilege
    /// before a transfer that stalled while running.
    @Test func timeHeldBackIsNotJudged() throws {
        let gate = Self.gate()
        let flag = CancellationFlag()
        gate.hold(2000)
        let first = gate.meter(cancel: flag)
        #expect(first.received(100))  // privileged (the only transfer)
        let second = gate.meter(cancel: flag)
        let held = Chunk(second, 100)
        // Held back for many windows: the first stalls and hands over the privilege; the second,
        // moving when it was stopped, takes it.
        #expect(held.wait(5))
        #expect(gate.parked == 100)
        flag.cancel()
        first.end()
        second.end()
        gate.release(2000)
        #expect(gate.held == 0)
    }

    @Test func configurationIsValidated() throws {
        var c = PendingBytes.Configuration(limit: 1 << 20)
        #expect(c.window == .seconds(1) && c.movingRate == 64 << 10 && c.parkedAllowance == 1 << 20)
        try c.validate()
        c.window = .zero
        #expect(throws: HalcyonError.self) { try c.validate() }
        c.window = .seconds(1)
        c.movingRate = 0
        #expect(throws: HalcyonError.self) { try c.validate() }
        c.movingRate = 1
        c.limit = 0
        #expect(throws: HalcyonError.self) { try c.validate() }
    }
}
