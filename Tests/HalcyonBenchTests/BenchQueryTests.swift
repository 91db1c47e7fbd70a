import Foundation
import HalcyonQueue
import HalcyonTestSupport
import Testing

@testable import HalcyonBench

/// The bench's query files (`Sources/HalcyonBench/Queries/*.sql`) against its `Query` types, as
/// `QueryFileTests` checks the queue's.
struct BenchQueryTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/HalcyonBench/Queries")

    static var samples: [any Query] {
        let backlog = Backlog(queued: 10, sources: ["file:///tmp/a.jpg"], failingSource: "http://127.0.0.1:9/gone.jpg")
        let rows = BenchSQL.BacklogRows(keyPrefix: backlog.keyPrefix)
        return [
            BenchSQL.AddQueues(queues: Backlog.queues), BenchSQL.WriteHistory(sources: backlog.sources, keyPrefix: backlog.keyPrefix, rows: 10),
            BenchSQL.PruneHistory(keyPattern: "k%"), BenchSQL.VacuumJobs(), BenchSQL.EnqueueBacklog(backlog: backlog, jobs: 0..<10),
            BenchSQL.ChurnClaimed(rows: rows), BenchSQL.ChurnRescued(), BenchSQL.ChurnRewritten(rows: rows), BenchSQL.ChurnHeld(rows: rows),
            BenchSQL.ChurnReleased(), BenchSQL.AnalyzeJobs(), BenchSQL.AnalyzeQueues(), BenchSQL.RemoveBacklog(keyPattern: "k%"),
            BenchSQL.DatabaseExists(database: "halcyon_bench"), BenchSQL.CreateBenchDatabase(), BenchSQL.CreatePgqueuerDatabase(),
            BenchSQL.ForeignJobs(), BenchSQL.DeleteBenchJobs(), BenchSQL.DeleteBenchWorkers(), BenchSQL.W1Outputs(), BenchSQL.W1Images(),
            BenchSQL.CopyForHits(copies: 2), BenchSQL.DeleteSucceeded(), BenchSQL.HitDrain(), BenchSQL.HostsDrain(keyPattern: "k%"),
            BenchSQL.W2Outputs(keyPattern: "k%"),
            BenchSQL.W3Outputs(keyPattern: "k%"), BenchSQL.SourceCosts(keyPattern: "k%"), BenchSQL.StageCPUPerImage(),
            BenchSQL.StageCPUPerSource(), BenchSQL.StartDelays(keyPattern: "k%"), BenchSQL.CountJobs(), BenchSQL.FinishedSince(since: Date()),
        ]
    }

    @Test func theFilesParseAndEveryStatementIsDeclaredOnce() throws {
        #expect(try QueryLibrary.parse(BenchSQL.files).count == BenchSQL.library.statements.count)
        let onDisk = try FileManager.default.contentsOfDirectory(atPath: Self.directory.path).filter { $0.hasSuffix(".sql") }
        #expect(Set(onDisk) == Set(BenchSQL.files.map(\.name)), "BenchSQL.files lists every file of \(Self.directory.path)")
        #expect(QueryChecks.declarationProblems(Self.samples, library: BenchSQL.library) == [])
        // The bench's statements are the bench's, not the queue's.
        #expect(BenchSQL.CountJobs.statement.file == "bench.sql" && BenchSQL.VacuumJobs.statement.file == "backlog.sql")
    }

    @Test(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
    func everyStatementPreparesWithItsParametersAndColumns() async throws {
        let problems = try await QueryChecks.preparedProblems(Self.samples)
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }
}
