import Foundation
import HalcyonQueue
import HalcyonRuntime
import Testing

@testable import HalcyonWorker

/// The waits each of the worker's back-offs had before there was one back-off: pinned, so that
/// moving them onto it changes none of them (seconds within a nanosecond).
@Suite struct WorkerBackoffPinTests {
    static func same(_ got: [Duration], _ expected: [Double]) -> Bool {
        got.count == expected.count && zip(got, expected).allSatisfy { abs($0.seconds - $1) < 1e-9 }
    }

    /// A transiently failed job: `--retry-base` (2 s) doubling to 10 minutes, then shortened by
    /// up to a quarter (the draw 0: not at all; 1: by a quarter).
    @Test func jobRetries() {
        var configuration = WorkerConfiguration(storeRoot: URL(fileURLWithPath: "/nonexistent"))
        let attempts = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 100]
        let b = configuration.backoff
        #expect(Self.same(attempts.map { b.delay(afterAttempt: $0, random: 0) }, [2, 4, 8, 16, 32, 64, 128, 256, 512, 600, 600, 600, 600]))
        #expect(
            Self.same(
                attempts.map { b.delay(afterAttempt: $0, random: 0.5) }, [1.75, 3.5, 7, 14, 28, 56, 112, 224, 448, 525, 525, 525, 525]))
        #expect(Self.same(attempts.map { b.delay(afterAttempt: $0, random: 1) }, [1.5, 3, 6, 12, 24, 48, 96, 192, 384, 450, 450, 450, 450]))
        for _ in 0..<100 {
            let d = b.delay(afterAttempt: 3)
            #expect(d >= .seconds(6) && d <= .seconds(8))
        }
        configuration.backoff.base = .milliseconds(300)  // `--retry-base 300ms`
        let short = configuration.backoff
        #expect(Self.same((1...4).map { short.delay(afterAttempt: $0, random: 0) }, [0.3, 0.6, 1.2, 2.4]))
        #expect(Self.same((1...4).map { short.delay(afterAttempt: $0, random: 1) }, [0.225, 0.45, 0.9, 1.8]))
        #expect(Self.same([short.delay(afterAttempt: 13, random: 0), short.delay(afterAttempt: 13, random: 1)], [600, 450]))
    }

    /// The store's check at start: 500 ms doubling to 5 s, shortened by up to a quarter.
    @Test func storeChecksAtStart() {
        let b = Worker.storeCheckBackoff
        #expect(Self.same((1...6).map { b.delay(afterAttempt: $0, random: 0) }, [0.5, 1, 2, 4, 5, 5]))
        #expect(Self.same((1...6).map { b.delay(afterAttempt: $0, random: 1) }, [0.375, 0.75, 1.5, 3, 3.75, 3.75]))
    }

    /// A bucket that cannot take the worker's results, probed again: 1 s doubling to 30 s, shortened by up to a quarter.
    @Test func storeRefusals() {
        let b = StoreHealth.pauseBackoff
        #expect(Self.same((1...7).map { b.delay(afterAttempt: $0, random: 0) }, [1, 2, 4, 8, 16, 30, 30]))
        #expect(Self.same((1...7).map { b.delay(afterAttempt: $0, random: 1) }, [0.75, 1.5, 3, 6, 12, 22.5, 22.5]))
    }

    /// A crashed worker process's restarts: 500 ms doubling to 30 s, no jitter.
    @Test func supervisorRestarts() {
        var configuration = SupervisorConfiguration(workerID: "w", arguments: [])
        let b = configuration.restartBackoff
        #expect(Self.same((1...9).map { b.delay(afterAttempt: $0) }, [0.5, 1, 2, 4, 8, 16, 30, 30, 30]))
        configuration.restartDelay = .seconds(40)  // above the cap: the cap rises to it
        #expect(Self.same((1...2).map { configuration.restartBackoff.delay(afterAttempt: $0) }, [40, 40]))
    }

    /// A webhook host's open circuit: `breakerCooldown` (30 s) doubling to `maxRetryDelay` (5 minutes).
    @Test func breakerCooldowns() {
        let gate = WebhookDeliverer.HostGate(configuration: WebhookConfiguration())
        #expect(Self.same((1...7).map { gate.cooldowns.delay(afterAttempt: $0) }, [30, 60, 120, 240, 300, 300, 300]))
    }

    /// Webhook deliveries: 1 s doubling to 5 minutes, no jitter; a receiver's Retry-After lengthens
    /// a wait up to the same cap, and one that is not a positive number is ignored.
    @Test func webhookRetries() {
        var webhooks = WebhookConfiguration()
        #expect(
            Self.same(
                (1...13).map { webhooks.retryDelay(afterAttempt: $0) }, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300, 300]))
        #expect(Self.same([webhooks.retryDelay(afterAttempt: 50)], [300]))
        let afters: [(Int, Double?, Double)] = [
            (1, nil, 1), (1, 3, 3), (4, 3, 8), (4, 9.5, 9.5), (1, 1e9, 300), (1, 0, 1), (1, -5, 1), (1, .nan, 1), (9, 299, 299),
        ]
        for (attempt, after, expected) in afters {
            #expect(Self.same([webhooks.retryDelay(afterAttempt: attempt, retryAfter: after)], [expected]), "\(attempt) \(String(describing: after))")
        }
        webhooks.retryBase = .milliseconds(250)
        webhooks.maxRetryDelay = .seconds(10)
        #expect(Self.same((1...8).map { webhooks.retryDelay(afterAttempt: $0) }, [0.25, 0.5, 1, 2, 4, 8, 10, 10]))
        #expect(Self.same([webhooks.retryDelay(afterAttempt: 1, retryAfter: 60)], [10]))
    }
}
