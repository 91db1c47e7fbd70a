import Foundation
import HalcyonQueue

/// The backlog's statements (`Sources/HalcyonBacklog/Queries/backlog.sql`, embedded like the
/// queue's), one typed `Query` each.
enum BacklogSQL {
    static let library = QueryLibrary(files: files)

    static let files: [(name: String, bytes: [UInt8])] = [("backlog.sql", PackageResources.backlog_sql)]

    /// A statement of the backlog's file.
    protocol Statement: Query {}

    struct AddQueues: Statement {
        static let name = "addQueues"
        var queues: [String]
        func bind(_ p: inout QueryParameters) { p.add(queues) }
    }

    struct WriteHistory: Statement {
        static let name = "writeHistory"
        var sources: [String]
        var keyPrefix: String
        var rows: Int

        func bind(_ p: inout QueryParameters) {
            p.add(sources)
            p.add(keyPrefix)
            p.add(rows)
        }
    }

    struct PruneHistory: Statement {
        static let name = "pruneHistory"
        var keyPattern: String
        func bind(_ p: inout QueryParameters) { p.add(keyPattern) }
    }

    struct VacuumJobs: Statement { static let name = "vacuumJobs" }

    struct EnqueueBacklog: Statement {
        static let name = "enqueueBacklog"
        var backlog: Backlog
        var jobs: Range<Int>

        func bind(_ p: inout QueryParameters) {
            p.add(backlog.sources)
            p.add(backlog.keyPrefix)
            p.add(backlog.chains)
            p.add(backlog.failingSource)
            p.add(max(1, backlog.failingEvery))
            p.add(jobs.lowerBound)
            p.add(backlog.delayedEvery.map { max(1, $0) } ?? 0)
            p.add(jobs.upperBound)
            p.add(max(1, backlog.hotEvery))
            p.add(max(0, backlog.fairKeys))
        }
    }

    /// The churn's statements over the backlog's queued rows: its two key patterns.
    struct BacklogRows: Sendable {
        var keyPrefix: String
        func bind(_ p: inout QueryParameters) {
            p.add(keyPrefix + "hot-%")
            p.add(keyPrefix + "own-%")
        }
    }

    struct ChurnClaimed: Statement {
        static let name = "churnClaimed"
        var rows: BacklogRows
        func bind(_ p: inout QueryParameters) { rows.bind(&p) }
    }

    struct ChurnRescued: Statement { static let name = "churnRescued" }

    struct ChurnRewritten: Statement {
        static let name = "churnRewritten"
        var rows: BacklogRows
        func bind(_ p: inout QueryParameters) { rows.bind(&p) }
    }

    struct ChurnHeld: Statement {
        static let name = "churnHeld"
        var rows: BacklogRows
        func bind(_ p: inout QueryParameters) { rows.bind(&p) }
    }

    struct ChurnReleased: Statement { static let name = "churnReleased" }
    struct AnalyzeJobs: Statement { static let name = "analyzeJobs" }
    struct AnalyzeQueues: Statement { static let name = "analyzeQueues" }

    struct RemoveBacklog: Statement {
        static let name = "removeBacklog"
        var keyPattern: String
        func bind(_ p: inout QueryParameters) { p.add(keyPattern) }
    }
}

extension BacklogSQL.Statement {
    static var library: QueryLibrary { BacklogSQL.library }
}
