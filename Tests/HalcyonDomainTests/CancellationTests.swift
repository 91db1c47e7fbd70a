import Foundation
import HalcyonDomain
import HalcyonRuntime
import Synchronization
import Testing

/// Waits that a job's cancellation ends: a slot's line, a retry's sleep.
@Suite struct CancellationTests {
    /// A job released at shutdown while it waited for a processing slot used to get the slot
    /// later and decode anyway; now it leaves the line when its flag goes up.
    @Test func aCancelledWaiterLeavesTheLineAndTakesNoPermit() async throws {
        let slots = AsyncSemaphore(1)
        #expect(await slots.wait(cancel: nil))  // the one permit is taken
        let flag = CancellationFlag()
        let waiter = Task { await slots.wait(cancel: flag) }
        try await Task.sleep(for: .milliseconds(50))
        flag.cancel()
        #expect(await waiter.value == false)
        // The permit, given back, goes to the next live waiter, not the cancelled one.
        let next = Task { await slots.wait(cancel: CancellationFlag()) }
        try await Task.sleep(for: .milliseconds(50))
        slots.signal()
        #expect(await next.value == true)
        slots.signal()
        #expect(await slots.wait(cancel: nil))
    }

    @Test func withPermitDoesNotRunTheBodyOnceCancelled() async throws {
        let slots = AsyncSemaphore(1)
        _ = await slots.wait(cancel: nil)
        let flag = CancellationFlag()
        let ran = Mutex(false)
        let task = Task { try await slots.withPermit(cancel: flag) { ran.withLock { $0 = true } } }
        try await Task.sleep(for: .milliseconds(20))
        flag.cancel()
        await #expect(throws: HalcyonError.self) { try await task.value }
        #expect(ran.withLock { $0 } == false)
    }

    @Test func aSleepEndsWhenTheFlagIsRaised() async throws {
        let flag = CancellationFlag()
        let started = ContinuousClock.now
        let sleeper = Task { await flag.sleep(seconds: 3600) }
        try await Task.sleep(for: .milliseconds(50))
        flag.cancel()
        #expect(await sleeper.value == false)
        // Of 3600: whatever else the test process runs (a loaded one was seen to take 100 s to wake
        // this task), the hour was not slept.
        #expect(ContinuousClock.now - started < .seconds(900))
        #expect(await CancellationFlag().sleep(seconds: 0.01) == true)
    }
}
