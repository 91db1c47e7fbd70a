import HalcyonRuntime
import Testing

@testable import HalcyonQueue

/// The waits each user of the back-off had before there was one back-off: pinned, so that
/// moving them onto it changes none of them (seconds within a nanosecond).
@Suite struct QueueBackoffPinTests {
    static func same(_ got: [Duration], _ expected: [Double]) -> Bool {
        got.count == expected.count && zip(got, expected).allSatisfy { abs($0.seconds - $1) < 1e-9 }
    }

    /// The database's waits: 100 ms doubling to `maximum` (10 s by default), no jitter.
    @Test func databaseRetries() {
        let waits = (1...10).map { DatabaseRetry().delay(afterFailures: $0) }
        #expect(Self.same(waits, [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10, 10, 10]), "\(waits)")
        let short = (1...4).map { DatabaseRetry(maximum: .milliseconds(300)).delay(afterFailures: $0) }
        #expect(Self.same(short, [0.1, 0.2, 0.3, 0.3]), "\(short)")
        #expect(Self.same([DatabaseRetry().delay(afterFailures: 0)], [0.1]))
    }

    /// LISTEN's reconnections: 100 ms doubling to 5 s, no jitter.
    @Test func listenReconnections() {
        let waits = (1...8).map { JobListener.reconnect.delay(afterAttempt: $0) }
        #expect(Self.same(waits, [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5, 5]), "\(waits)")
    }
}
