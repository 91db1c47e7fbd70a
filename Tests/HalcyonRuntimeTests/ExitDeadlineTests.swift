import Foundation
import HalcyonRuntime
import Synchronization
import Testing

/// The deadline a stopping worker must exit by: it fires once, the earliest armed time wins, and
/// a later arming never postpones it.
@Suite struct ExitDeadlineTests {
    @Test func theEarliestArmedDeadlineFiresOnce() async throws {
        let started = ContinuousClock.now
        // What fired and when, taken on the timer's own thread: the test's polling below runs on
        // the cooperative pool, which a loaded suite can starve for seconds.
        let fired = Mutex<[(waited: Duration, after: Duration)]>([])
        let deadline = ExitDeadline { waited in
            fired.withLock { $0.append((waited, ContinuousClock.now - started)) }
        }
        deadline.arm(after: .seconds(30))
        deadline.arm(after: .milliseconds(200))  // a second stop request: sooner
        deadline.arm(after: .seconds(10))  // never later
        while fired.withLock({ $0.isEmpty }), ContinuousClock.now - started < .seconds(20) {
            try await Task.sleep(for: .milliseconds(20))
        }
        try await Task.sleep(for: .milliseconds(300))
        let firings = fired.withLock { $0 }
        #expect(firings.map(\.waited) == [.milliseconds(200)])
        // Before the 10 s arming could have fired: the earliest deadline won.
        #expect(firings.allSatisfy { $0.after < .seconds(10) })
    }

    @Test func startUpFiguresAreThisProcesssOwn() {
        let since = StartupClock.sinceStartMilliseconds
        #expect(since != nil && since! >= 0)
        #expect(StartupClock.cpuMilliseconds > 0)
        #expect(StartupClock.metadata["since_start_ms"] != nil && StartupClock.metadata["cpu_ms"] != nil)
    }
}
