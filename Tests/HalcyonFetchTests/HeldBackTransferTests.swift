import Dispatch
import Foundation
import HalcyonDomain
import HalcyonFetch
import HalcyonRuntime
import HalcyonTestSupport
import Synchronization
import Testing

/// A transfer its meter holds back (the worker's pending-bytes budget) is paused, not slow: the
/// time it waits counts neither against the whole transfer's limit nor against the low-speed
/// abort. libcurl's own limits counted it, and a transfer paused longer than its low-speed window
/// failed `fetch.timeout` although its origin was fast.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (origin)"))
struct HeldBackTransferTests {
    /// Holds the transfer back `pause` at its first chunk, on the transfer's own thread.
    final class PausingMeter: TransferMeter {
        let pause: Double
        private let paused = Mutex(false)

        init(pause: Double) { self.pause = pause }

        func received(_ bytes: Int) -> Bool {
            let first = paused.withLock { p in
                defer { p = true }
                return !p
            }
            if first { Thread.sleep(forTimeInterval: pause) }
            return true
        }
    }

    /// A `total` limit for the whole transfer and, unless `lowSpeed` is false, a low-speed abort
    /// at 1,000 bytes/s over 1 s.
    static func client(total: Duration = .seconds(2), lowSpeed: Bool = true) -> HTTPClient {
        var c = FetchConfiguration()
        c.addressPolicy = AddressPolicy(allowed: [CIDR("127.0.0.1/32")!])
        c.totalTimeout = total
        c.lowSpeedBytes = lowSpeed ? 1000 : 0
        c.lowSpeedTime = .seconds(1)
        return HTTPClient(configuration: c)
    }

    @Test func timeHeldBackCountsAgainstNoLimit() throws {
        // 1,000 bytes at once, then 100,000 dripped at 20,000 bytes/s (5 s), well above the
        // low-speed limit; held back 3 s at the first chunk. 5 s from start to end, past the whole
        // transfer's 3.5 s; about 2 s of it running.
        let name = "held-back-\(UUID().uuidString.prefix(8)).bin"
        let body = Data((0..<101_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        _ = try Origin.publish(name, body)
        let started = ContinuousClock.now
        let response = try Self.client(total: .milliseconds(3500)).get(
            URL(string: TestEnvironment.origin + "/drip/1000/20000/\(name)")!, cancel: CancellationFlag(), meter: PausingMeter(pause: 3))
        #expect(response.status == 200)
        #expect(response.body == body)
        #expect(ContinuousClock.now - started >= .milliseconds(4500))
    }

    @Test func aSlowOriginStillTimesOut() throws {
        // Below the low-speed limit while running: the abort still comes, within its window and
        // the time held back (1 s here, not counted).
        let started = ContinuousClock.now
        #expect {
            _ = try Self.client().get(
                URL(string: TestEnvironment.origin + "/trickle/20/100000?held-\(UUID().uuidString.prefix(8))")!, cancel: CancellationFlag(),
                meter: PausingMeter(pause: 1))
        } throws: { error in
            let e = error as? HalcyonError
            return e?.code == .timeout && e?.message.contains("slower than 1000 bytes/s") == true
                && e?.message.contains("held back by the download budget not counted") == true
        }
        #expect(ContinuousClock.now - started < .seconds(30))
        // And a server that never answers runs into the whole transfer's limit.
        #expect {
            _ = try Self.client(lowSpeed: false).get(URL(string: TestEnvironment.origin + "/slow/10")!, cancel: CancellationFlag())
        } throws: { error in
            let e = error as? HalcyonError
            return e?.code == .timeout && e?.message.contains("not finished after 2s") == true
        }
    }
}
