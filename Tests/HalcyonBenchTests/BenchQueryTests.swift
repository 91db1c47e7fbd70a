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
            BenchSQL.InsertHashes(hashes: [String(repeating: "a", count: 64)], first: 0), BenchSQL.DeleteHashes(), BenchSQL.VacuumAnalyzeJobs(),
            BenchSQL.ScanHashes(hash: String(repeating: "a", count: 64), maxDistance: 31),
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

    /// A job's `decode_cpu_ms` is its share of its source's decode: a source's stage CPU adds its
    /// jobs' up (three jobs' 30 ms shares are one 90 ms decode), an image's is its job's own.
    @Test(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
    func aSourcesStageCPUAddsUpItsJobsShares() async throws {
        let db = try await TestDatabase.create()
        try await db.query(
            """
            INSERT INTO halcyon.jobs (source, cache_key, timings) VALUES
                ('https://e.com/a.jpg', 'halcyon-bench:a1', '{"decode_cpu_ms": 30, "process_cpu_ms": 5, "encode_cpu_ms": 2, "store_cpu_ms": 1}'),
                ('https://e.com/a.jpg', 'halcyon-bench:a2', '{"decode_cpu_ms": 30, "process_cpu_ms": 7, "encode_cpu_ms": 2, "store_cpu_ms": 1}'),
                ('https://e.com/a.jpg', 'halcyon-bench:a3', '{"decode_cpu_ms": 30, "process_cpu_ms": 9, "encode_cpu_ms": 2, "store_cpu_ms": 1}'),
                ('https://e.com/b.jpg', 'halcyon-bench:b1', '{"decode_cpu_ms": 40, "process_cpu_ms": 3, "encode_cpu_ms": 2, "store_cpu_ms": 1}')
            """)
        let c = try await db.connect()
        let perSource = Dictionary(uniqueKeysWithValues: try await Bench.stageMeans(c, perSource: true).map { ($0.name, $0.ms) })
        let perImage = Dictionary(uniqueKeysWithValues: try await Bench.stageMeans(c, perSource: false).map { ($0.name, $0.ms) })
        await c.close()
        #expect(perSource == ["decode": 65, "process": 12, "encode": 4, "store": 2], "\(perSource)")
        #expect(perImage == ["decode": 32.5, "process": 6, "encode": 2, "store": 1], "\(perImage)")
    }
}
