import Foundation
import HalcyonQueue

/// The bench's statements (`Sources/HalcyonBench/Queries/*.sql`, embedded like the queue's), one
/// typed `Query` each: what the bench writes and reads beside the queue's own API (its backlog's
/// are `BacklogSQL`, in HalcyonBacklog).
enum BenchSQL {
    static let library = QueryLibrary(files: files)

    static let files: [(name: String, bytes: [UInt8])] = [("bench.sql", PackageResources.bench_sql)]

    /// A statement of the bench's files.
    protocol Statement: Query {}

    /// The row of a count of outputs as asked, `ok`.
    struct Outputs: QueryRow {
        static let columns = ["ok"]
        var ok: Int
        init?(_ row: RowReader) { ok = row.int("ok") ?? 0 }
    }

    /// A row of milliseconds, `ms`.
    struct Milliseconds: QueryRow {
        static let columns = ["ms"]
        var ms: Double
        init?(_ row: RowReader) {
            guard let ms = row.double("ms") else { return nil }
            self.ms = ms
        }
    }

    // MARK: bench.sql

    struct DatabaseExists: Statement {
        static let name = "databaseExists"
        var database: String
        func bind(_ p: inout QueryParameters) { p.add(database) }

        struct Row: QueryRow {
            static let columns = ["found"]
            /// A row when the database exists.
            static let unread = Set(columns)
            init?(_ row: RowReader) {}
        }
    }

    struct CreateBenchDatabase: Statement { static let name = "createBenchDatabase" }
    struct CreatePgqueuerDatabase: Statement { static let name = "createPgqueuerDatabase" }

    struct ForeignJobs: Statement {
        typealias Row = CountRow
        static let name = "foreignJobs"
    }

    struct DeleteBenchJobs: Statement { static let name = "deleteBenchJobs" }
    struct DeleteBenchWorkers: Statement { static let name = "deleteBenchWorkers" }

    struct W1Outputs: Statement {
        typealias Row = Outputs
        static let name = "w1Outputs"
    }

    struct W1Images: Statement {
        static let name = "w1Images"

        struct Row: QueryRow {
            static let columns = ["cache_key", "result_path", "ms"]
            var cacheKey: String?
            var resultPath: String?
            var ms: Double?

            init?(_ row: RowReader) {
                cacheKey = row.text("cache_key")
                resultPath = row.text("result_path")
                ms = row.double("ms")
            }
        }
    }

    struct CopyForHits: Statement {
        static let name = "copyForHits"
        var copies: Int
        func bind(_ p: inout QueryParameters) { p.add(copies) }
    }

    struct DeleteSucceeded: Statement { static let name = "deleteSucceeded" }

    struct HitDrain: Statement {
        static let name = "hitDrain"

        struct Row: QueryRow {
            static let columns = ["n", "drain"]
            var hits: Int
            var drain: Double?

            init?(_ row: RowReader) {
                hits = row.int("n") ?? 0
                drain = row.double("drain")
            }
        }
    }

    /// X: the run's jobs that succeeded as asked, and their drain (first claim to last completion).
    struct HostsDrain: Statement {
        static let name = "hostsDrain"
        var keyPattern: String
        func bind(_ p: inout QueryParameters) { p.add(keyPattern) }

        struct Row: QueryRow {
            static let columns = ["n", "drain"]
            var ok: Int
            var drain: Double?

            init?(_ row: RowReader) {
                ok = row.int("n") ?? 0
                drain = row.double("drain")
            }
        }
    }

    struct W2Outputs: Statement {
        typealias Row = Outputs
        static let name = "w2Outputs"
        var keyPattern: String
        func bind(_ p: inout QueryParameters) { p.add(keyPattern) }
    }

    struct W3Outputs: Statement {
        typealias Row = Outputs
        static let name = "w3Outputs"
        var keyPattern: String
        func bind(_ p: inout QueryParameters) { p.add(keyPattern) }
    }

    struct SourceCosts: Statement {
        typealias Row = Milliseconds
        static let name = "sourceCosts"
        var keyPattern: String
        func bind(_ p: inout QueryParameters) { p.add(keyPattern) }
    }

    /// Mean CPU milliseconds per image or per source in each stage.
    struct StageCPURow: QueryRow {
        static let columns = Bench.stageNames
        var means: [(name: String, ms: Double)]
        init?(_ row: RowReader) { means = Bench.stageNames.map { ($0, row.double($0) ?? 0) } }
    }

    struct StageCPUPerImage: Statement {
        typealias Row = StageCPURow
        static let name = "stageCPUPerImage"
    }

    struct StageCPUPerSource: Statement {
        typealias Row = StageCPURow
        static let name = "stageCPUPerSource"
    }

    struct StartDelays: Statement {
        typealias Row = Milliseconds
        static let name = "startDelays"
        var keyPattern: String
        func bind(_ p: inout QueryParameters) { p.add(keyPattern) }
    }

    struct CountJobs: Statement {
        typealias Row = CountRow
        static let name = "countJobs"
    }

    struct FinishedSince: Statement {
        typealias Row = CountRow
        static let name = "finishedSince"
        var since: Date
        func bind(_ p: inout QueryParameters) { p.add(since) }
    }

    /// N: a batch of perceptual hashes, numbered from `first`.
    struct InsertHashes: Statement {
        static let name = "insertHashes"
        var hashes: [String]
        var first: Int
        func bind(_ p: inout QueryParameters) {
            p.add(hashes.joined(separator: ","))
            p.add(first)
        }
    }

    struct DeleteHashes: Statement { static let name = "deleteHashes" }
    struct VacuumAnalyzeJobs: Statement { static let name = "vacuumAnalyzeJobs" }

    /// N's reference answer: a scan.
    struct ScanHashes: Statement {
        static let name = "scanHashes"
        var hash: String
        var maxDistance: Int
        func bind(_ p: inout QueryParameters) {
            p.add(hash)
            p.add(maxDistance)
        }

        typealias Row = IDRow
    }
}

extension BenchSQL.Statement {
    static var library: QueryLibrary { BenchSQL.library }
}
