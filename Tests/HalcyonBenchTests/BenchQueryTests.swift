import Foundation
import HalcyonQueue
import HalcyonTestSupport
import Testing

@testable import HalcyonBench

/// The bench's query files (`Sources/HalcyonBench/Queries/*.sql`) against its `Query` types, as
/// `QueryFileTests` checks the queue's (and `BacklogQueryTests` the backlog's).
struct BenchQueryTests {
    static var samples: [any Query] {
        [
            BenchSQL.DatabaseExists(database: "halcyon_bench"), BenchSQL.CreateBenchDatabase(), BenchSQL.CreatePgqueuerDatabase(),
            BenchSQL.ForeignJobs(), BenchSQL.DeleteBenchJobs(), BenchSQL.DeleteBenchWorkers(), BenchSQL.W1Outputs(), BenchSQL.W1Images(),
            BenchSQL.CopyForHits(copies: 2), BenchSQL.DeleteSucceeded(), BenchSQL.HitDrain(), BenchSQL.HostsDrain(keyPattern: "k%"),
            BenchSQL.W2Outputs(keyPattern: "k%"),
            BenchSQL.W3Outputs(keyPattern: "k%"), BenchSQL.SourceCosts(keyPattern: "k%"), BenchSQL.StageCPUPerImage(),
            BenchSQL.StageCPUPerSource(), BenchSQL.StartDelays(keyPattern: "k%"), BenchSQL.CountJobs(), BenchSQL.FinishedSince(since: Date()),
        ]
    }

    @Test func theFilesParseAndEveryStatementIsDeclaredOnce() throws {
        #expect(try QueryChecks.fileProblems(Self.samples, library: BenchSQL.library, files: BenchSQL.files, module: "HalcyonBench") == [])
        // The bench's statements are the bench's, not the queue's.
        #expect(BenchSQL.CountJobs.statement.file == "bench.sql")
    }

    @Test(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
    func everyStatementPreparesWithItsParametersAndColumns() async throws {
        let problems = try await QueryChecks.preparedProblems(Self.samples)
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }
}
