import Foundation
import HalcyonRuntime
import Synchronization
import Testing

/// The deadline a stopping worker must exit by: it fires once, the earliest armed time wins, and
/// a later arming never postpones it.
@Suite struct ExitDeadlineTests {
    @Test func theEarliestArmedDeadlineFiresOnce() async throws {
        let fired = Mutex<[Duration]>([])
        let deadline = ExitDeadline { waited in fired.withLock { $0.append(waited) } }
        let started = ContinuousClock.now
        deadline.arm(after: .seconds(30))
        deadline.arm(after: .milliseconds(200))  // a second stop request: sooner
        deadline.arm(after: .seconds(10))  // never later
        while fired.withLock({ $0.isEmpty }), ContinuousClock.now - started < .seconds(20) {
            try await Task.sleep(for: .milliseconds(20))
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(fired.withLock { $0 } == [.milliseconds(200)])
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test func startUpFiguresAreThisProcesssOwn() {
        let since = StartupClock.sinceStartMilliseconds
        #expect(since != nil && since! >= 0)
        #expect(StartupClock.cpuMilliseconds > 0)
        #expect(StartupClock.metadata["since_start_ms"] != nil && StartupClock.metadata["cpu_ms"] != nil)
    }
}
