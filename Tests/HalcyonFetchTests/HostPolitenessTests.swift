import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonTestSupport
import Testing

@testable import HalcyonFetch

/// `--per-host-concurrency` and `Retry-After` pauses, against the real test origin: the origin
/// counts how many requests of a group it serves at once.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (origin)"))
struct HostPolitenessTests {
    @Test func downloadsFromOneHostNeverExceedThePerHostLimit() async throws {
        try Origin.publish("polite.png", FetcherTests.png)
        let group = "polite-\(UUID().uuidString.prefix(8))"
        let fetcher = FetcherTests.makeFetcher(concurrency: 8) { $0.perHostConcurrency = 2 }
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for i in 0..<6 {
                tasks.addTask {
                    _ = try await fetcher.fetch(
                        "\(TestEnvironment.origin)/slowfile/1/polite.png?group=\(group)&i=\(i)", cancel: CancellationFlag())
                }
            }
            try await tasks.waitForAll()
        }
        // Six at once without the limit; at most two with it (fewer only on a starved machine).
        let most = try #require(Int(try Origin.get("\(TestEnvironment.origin)/_concurrency/\(group)")))
        #expect((1...2).contains(most), "the origin saw \(most) downloads at once")
        #expect(fetcher.hosts.trackedHosts == 0)  // nothing left behind once idle
    }

    @Test func aRetryAfterPausesTheHostsOtherDownloadsToo() async throws {
        try Origin.publish("polite.png", FetcherTests.png)
        let key = "pause-\(UUID().uuidString.prefix(8))"
        // No retries: the fetch returns right after its 429 with Retry-After: 3.
        let fetcher = FetcherTests.makeFetcher(retries: 0)
        let asked = ContinuousClock.now
        await #expect(throws: HalcyonError.self) {
            try await fetcher.fetch("\(TestEnvironment.origin)/retry-after/3/\(key)/polite.png", cancel: CancellationFlag())
        }
        let until = try #require(fetcher.hosts.pausedUntil("127.0.0.1"))
        #expect(until - asked >= .seconds(3))  // paused from the answer on, for what it asked
        // Another download from the same host waits for the pause although it never got a 429…
        let started = ContinuousClock.now
        _ = try await fetcher.fetch("\(TestEnvironment.origin)/files/polite.png?other=\(key)", cancel: CancellationFlag())
        #expect(ContinuousClock.now >= until)
        // It waited out what was left of the pause (under the full suite's load the 429's
        // round trip alone has taken 2.4 of the 3 s, so the wait itself can be short).
        #expect(ContinuousClock.now - started >= min(.seconds(1), until - started))
        // …and a download whose job is cancelled meanwhile leaves the line at once.
        let flag = CancellationFlag()
        fetcher.hosts.pause("127.0.0.1", for: .seconds(600))
        Task {
            try await Task.sleep(for: .milliseconds(200))
            flag.cancel()
        }
        let waited = ContinuousClock.now
        await #expect(throws: HalcyonError.self) {
            try await fetcher.fetch("\(TestEnvironment.origin)/files/polite.png?cancelled=\(key)", cancel: flag)
        }
        #expect(ContinuousClock.now - waited < .seconds(300))  // the pause was 600 s; a loaded test process wakes late
    }
}
