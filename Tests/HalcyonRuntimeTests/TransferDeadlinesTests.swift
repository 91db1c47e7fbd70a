import HalcyonRuntime
import Testing

/// A transfer's time limits are counted on the time it runs: time its meter held it back is
/// taken off, for the whole transfer's limit and for the low-speed abort alike.
struct TransferDeadlinesTests {
    let start = ContinuousClock.now

    func at(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int64(seconds * 1000)) }

    @Test func theWholeTransfersLimitLeavesOutTimeHeldBack() {
        var d = TransferDeadlines(total: .seconds(2), lowSpeedBytes: 0, lowSpeedTime: .zero, now: start)
        #expect(d.check(bytes: 0, underWay: true, now: at(1.9)) == nil)
        // Held back for 5 s of the first 6: 1 s of transfer.
        d.heldBack(for: .seconds(5))
        #expect(d.check(bytes: 0, underWay: true, now: at(6)) == nil)
        #expect(d.running(at: at(6)) == .seconds(1))
        let reason = d.check(bytes: 0, underWay: true, now: at(7.1))
        #expect(reason?.contains("not finished after 2s of transfer") == true, "\(reason ?? "nil")")
        #expect(reason?.contains("5s it was held back") == true, "\(reason ?? "nil")")
    }

    @Test func theLowSpeedAbortLeavesOutTimeHeldBack() {
        var d = TransferDeadlines(total: nil, lowSpeedBytes: 1000, lowSpeedTime: .seconds(2), now: start)
        // Not before the request is under way.
        #expect(d.check(bytes: 0, underWay: false, now: at(10)) == nil)
        #expect(d.check(bytes: 0, underWay: true, now: at(10)) == nil)  // the window starts
        #expect(d.check(bytes: 500, underWay: true, now: at(11)) == nil)
        // Held back 30 s after that: the window has run 1.5 s, not 31.5.
        d.heldBack(for: .seconds(30))
        #expect(d.check(bytes: 500, underWay: true, now: at(41.5)) == nil)
        // A whole window's worth of bytes starts the next window.
        #expect(d.check(bytes: 2500, underWay: true, now: at(41.8)) == nil)
        #expect(d.check(bytes: 2600, underWay: true, now: at(43.7)) == nil)
        let reason = d.check(bytes: 2600, underWay: true, now: at(43.9))
        #expect(reason?.hasPrefix("slower than 1000 bytes/s for 2s") == true, "\(reason ?? "nil")")
    }

    @Test func aSteadyTransferAtTheLimitIsNotAborted() {
        var d = TransferDeadlines(total: nil, lowSpeedBytes: 1000, lowSpeedTime: .seconds(2), now: start)
        var bytes = 0
        for tenth in 0...300 {
            bytes += 100
            #expect(d.check(bytes: bytes, underWay: true, now: at(Double(tenth) / 10)) == nil)
        }
    }
}
