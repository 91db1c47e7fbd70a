import Foundation
import HalcyonQueue
import HalcyonSamples
import HalcyonTestSupport
import Testing

/// A primary failover mid-drain: two workers on a multi-host connection string, the primary
/// crashes, its streaming standby is promoted, and the drain finishes on the new primary.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct FailoverTests {
    @Test(.processes(2)) func workersFollowAPromotedStandby() async throws {
        _ = try Origin.publish("failover.jpg", try SampleImages.photo(width: 160, height: 120, seed: 9))
        let cluster = try ReplicatedCluster()
        defer { cluster.remove() }
        let conninfo = cluster.conninfo
        let migrate = try HalcyonProcess(["migrate"], conninfo: conninfo)
        #expect(await migrate.wait(timeout: 180) == 0, "\(migrate.output)")
        let n = 400
        let c = try await PGConnection.connect(conninfo)
        _ = try await JobQueue(connection: c).enqueue(
            batch: (0..<n).map { i in
                // Each fetch takes 50 ms at the origin: the drain lasts long enough to fail over in.
                var j = JobQueue.NewJob(source: "\(TestEnvironment.origin)/slowfile/0.05/failover.jpg?t=\(cluster.primaryPort)&j=\(i)")
                j.processors = "resize(40x40) |> format(png)"
                return j
            })
        await c.close()
        let store = try TestEnvironment.temporaryDirectory("store")
        let workers = try (0..<2).map { _ in
            try TestWorker(
                ["work", "--store", store.path, "--allow-network", "127.0.0.1/32", "--log-level", "info", "--concurrency", "2"],
                conninfo: conninfo)
        }
        for w in workers { #expect(try await w.ready()) }

        // Counted on the standby: it serves reads before and after the promotion.
        func counts() async -> (succeeded: Int, failed: Int, open: Int, reruns: Int)? {
            guard let c = try? await PGConnection.connect(cluster.standbyConninfo) else { return nil }
            defer { Task { await c.close() } }
            guard
                let rows = try? await c.execute(
                    """
                    SELECT count(*) FILTER (WHERE state = 'succeeded') AS ok, count(*) FILTER (WHERE state = 'failed') AS failed,
                           count(*) FILTER (WHERE state IN ('queued', 'running')) AS open,
                           count(*) FILTER (WHERE attempt > 1) AS reruns FROM halcyon.jobs
                    """)
            else { return nil }
            func n(_ column: String) -> Int { Int(rows.value(0, column) ?? "") ?? -1 }
            return (n("ok"), n("failed"), n("open"), n("reruns"))
        }
        #expect(try await waitForProgress(stall: 90, { await counts()?.succeeded ?? -1 }, until: { $0 >= 60 }), "no progress before the failover")
        let atCrash = await counts()?.succeeded ?? 0
        #expect(atCrash < n, "the drain finished before the failover")

        try cluster.stopPrimary(mode: "immediate")
        let crashed = Date()
        try cluster.promoteStandby()
        let promoted = Date().timeIntervalSince(crashed)
        // What the standby had received by then; the next success is the new primary's work.
        let base = await counts()?.succeeded ?? atCrash
        let resumed = try await waitUntil(120) { (await counts()?.succeeded ?? 0) > base }
        let resumeSeconds = Date().timeIntervalSince(crashed)
        #expect(resumed, "no job finished on the promoted standby")
        let drained = try await waitForProgress(stall: 90, { await counts()?.open ?? -1 }, until: { $0 == 0 })
        #expect(drained, "the drain did not finish on the new primary")
        let final = await counts()
        for w in workers {
            #expect(w.isRunning, "a worker exited on the failover: \(w.output.suffix(1500))")
            w.signal(SIGTERM)
            #expect(await w.wait(timeout: 30) == 0, "\(w.output.suffix(1500))")
        }
        print(
            String(
                format:
                    "failover: %d of %d done at the crash (%d replicated); promoted in %.1f s; first job finished on it %.1f s after the crash; %d jobs ran twice",
                atCrash, n, base, promoted, resumeSeconds, final?.reruns ?? -1))
        #expect(final?.succeeded == n, "\(String(describing: final))")
        #expect(final?.failed == 0)
        // What a failover costs: the jobs in flight (4 slots) and outcomes the standby had not
        // yet received when the primary died, run again — a handful, not the backlog.
        #expect((final?.reruns ?? 99) <= 20, "\(String(describing: final))")
    }
}
