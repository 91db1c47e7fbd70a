import Foundation
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

@testable import HalcyonWorker

/// The usage roll-up's run (`UsageRollUpService.run`) against a real database: a stop while it
/// waits on the database. (What it computes: `UsageTests`; with real workers: `UsageWorkerTests`.)
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct UsageRollUpServiceTests {
    /// A stop while the run waits on the database — here behind another session's lock on the
    /// windows, as it would wait on a long build — cancels its statement at once: the run ends
    /// in moments with an error and nothing kept, and the next run does the work.
    @Test func aStopCancelsTheStatementTheRunWaitsFor() async throws {
        let db = try await TestDatabase.create()
        let blocker = try await db.connect()
        try await blocker.executeScript("BEGIN; SELECT period FROM halcyon.usage_windows FOR UPDATE")
        let cancel = CancellationFlag()
        let queue = JobQueue(connection: try await db.connect(statementTimeout: 600))
        let started = ContinuousClock.now
        let run = Task { try await UsageRollUpService.run(queue, holder: "usage-stop-test", retain: .days(400), cancel: cancel) }
        #expect(
            try await waitUntil(60) {
                try await db.query(
                    "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%halcyon.usage_windows%FOR UPDATE%' AND pid <> pg_backend_pid()"
                ).value(0, "n") == "1"
            })
        cancel.cancel()
        await #expect(throws: DatabaseError.self) { _ = try await run.value }
        #expect(ContinuousClock.now - started < .seconds(300), "of a 600 s statement timeout")
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.usage_windows WHERE since IS NOT NULL").value(0, "n") == "0")
        try await blocker.execute("ROLLBACK")
        await blocker.close()

        let next = try await UsageRollUpService.run(
            JobQueue(connection: try await db.connect()), holder: "usage-stop-test", retain: .days(400), cancel: CancellationFlag())
        #expect(next?.windows.steps.map(\.action) == [.build, .build], "\(String(describing: next?.windows))")
    }
}
