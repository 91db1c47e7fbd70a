import HalcyonQueue
import HalcyonTestSupport
import Testing

@testable import HalcyonBacklog

/// The backlog's query file (`Sources/HalcyonBacklog/Queries/backlog.sql`) against its `Query`
/// types, as `QueryFileTests` checks the queue's.
struct BacklogQueryTests {
    static var samples: [any Query] {
        let backlog = Backlog(queued: 10, sources: ["file:///tmp/a.jpg"], failingSource: "http://127.0.0.1:9/gone.jpg")
        let rows = BacklogSQL.BacklogRows(keyPrefix: backlog.keyPrefix)
        return [
            BacklogSQL.AddQueues(queues: Backlog.queues),
            BacklogSQL.WriteHistory(sources: backlog.sources, keyPrefix: backlog.keyPrefix, rows: 10),
            BacklogSQL.PruneHistory(keyPattern: "k%"), BacklogSQL.VacuumJobs(), BacklogSQL.EnqueueBacklog(backlog: backlog, jobs: 0..<10),
            BacklogSQL.ChurnClaimed(rows: rows), BacklogSQL.ChurnRescued(), BacklogSQL.ChurnRewritten(rows: rows),
            BacklogSQL.ChurnHeld(rows: rows), BacklogSQL.ChurnReleased(), BacklogSQL.AnalyzeJobs(), BacklogSQL.AnalyzeQueues(),
            BacklogSQL.RemoveBacklog(keyPattern: "k%"),
        ]
    }

    @Test func theFileParsesAndEveryStatementIsDeclaredOnce() throws {
        #expect(
            try QueryChecks.fileProblems(Self.samples, library: BacklogSQL.library, files: BacklogSQL.files, module: "HalcyonBacklog") == [])
        // The backlog's statements are its own, not the queue's.
        #expect(BacklogSQL.VacuumJobs.statement.file == "backlog.sql")
    }

    @Test(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
    func everyStatementPreparesWithItsParametersAndColumns() async throws {
        let problems = try await QueryChecks.preparedProblems(Self.samples)
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }
}
