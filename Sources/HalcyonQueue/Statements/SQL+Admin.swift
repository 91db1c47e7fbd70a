import Foundation
import HalcyonRuntime

// admin.sql, status.sql, retention.sql: what operators and applications do.

extension SQL {
    struct Enqueue: Query {
        static let name = "enqueue"
        var job: JobQueue.NewJob

        func bind(_ p: inout QueryParameters) {
            p.add(job.source)
            p.add(job.processors)
            p.add(job.cacheKey)
            p.add(job.fallbackSources)
            p.add(json: job.options)
            p.add(job.priority)
            p.add(job.maxAttempts)
            p.add(timestamp: job.runAt)
            p.add(job.queue)
            p.add(job.uniqueKey)
            p.add(job.tags)
            p.add(job.fairKey)
            p.add(job.trace?.traceparent)
            p.add(job.trace?.tracestate)
        }

        struct Row: QueryRow {
            static let columns = ["id", "inserted"]
            var enqueued: JobQueue.Enqueued

            init?(_ row: RowReader) {
                guard let id = row.int64("id") else { return nil }
                enqueued = JobQueue.Enqueued(id: id, inserted: row.bool("inserted") ?? false)
            }
        }
    }

    struct ShowJob: Query {
        typealias Row = JobRow
        static let name = "showJob"
        var id: Int64
        func bind(_ p: inout QueryParameters) { p.add(id) }
    }

    struct JobStates: Query {
        static let name = "jobStates"
        var ids: [Int64]
        func bind(_ p: inout QueryParameters) { p.add(ids) }

        struct Row: QueryRow {
            static let columns = ["id", "state", "code", "cache_hit", "result_path"]
            var status: JobQueue.JobStatus

            init?(_ row: RowReader) {
                guard let job = JobRow(row), let state = job.state else { return nil }
                status = JobQueue.JobStatus(id: job.id, state: state, code: row.text("code"), cacheHit: job.cacheHit, resultPath: job.resultPath)
            }
        }
    }

    struct Retry: Query {
        typealias Row = IDRow
        static let name = "retry"
        var ids: [Int64]
        func bind(_ p: inout QueryParameters) { p.add(ids) }
    }

    struct Cancel: Query {
        typealias Row = IDRow
        static let name = "cancel"
        var ids: [Int64]
        func bind(_ p: inout QueryParameters) { p.add(ids) }
    }

    struct Now: Query {
        static let name = "now"

        struct Row: QueryRow {
            static let columns = ["now"]
            var now: String
            init?(_ row: RowReader) {
                guard let now = row.text("now") else { return nil }
                self.now = now
            }
        }
    }

    struct CountFiltered: Query {
        typealias Row = CountRow
        static let name = "countFiltered"
        var filter: JobQueue.JobFilter
        var slots: [String: QuerySlot] { filter.slots }
        func bind(_ p: inout QueryParameters) { filter.bind(&p) }
    }

    /// `retryFiltered` and `cancelFiltered`'s parameters: the filter, then $8 and $9.
    struct FilteredBatch: Sendable {
        var filter: JobQueue.JobFilter
        var limit: Int
        /// The operation's start, as the database's clock read it (`now`).
        var asOf: String?

        func bind(_ p: inout QueryParameters) {
            filter.bind(&p)
            p.add(limit)
            p.add(timestamp: asOf)
        }
    }

    struct RetryFiltered: Query {
        typealias Row = IDRow
        static let name = "retryFiltered"
        var batch: FilteredBatch
        var slots: [String: QuerySlot] { batch.filter.slots }
        func bind(_ p: inout QueryParameters) { batch.bind(&p) }
    }

    struct CancelFiltered: Query {
        typealias Row = IDRow
        static let name = "cancelFiltered"
        var batch: FilteredBatch
        var slots: [String: QuerySlot] { batch.filter.slots }
        func bind(_ p: inout QueryParameters) { batch.bind(&p) }
    }

    struct ProgressCounts: Query {
        static let name = "progressCounts"
        var since: Date
        func bind(_ p: inout QueryParameters) { p.add(since) }

        struct Row: QueryRow {
            static let columns = ["runnable", "running", "succeeded", "failed"]
            var progress: JobQueue.Progress

            init?(_ row: RowReader) {
                progress = JobQueue.Progress(
                    runnable: row.int("runnable") ?? 0, running: row.int("running") ?? 0, succeeded: row.int("succeeded") ?? 0,
                    failed: row.int("failed") ?? 0)
            }
        }
    }

    struct QueueDetail: Query {
        static let name = "queueDetail"

        struct Row: QueryRow {
            static let columns = ["runnable", "scheduled", "oldest_age"]
            var runnable: Int
            var scheduled: Int
            var oldestAge: Double?

            init?(_ row: RowReader) {
                runnable = row.int("runnable") ?? 0
                scheduled = row.int("scheduled") ?? 0
                oldestAge = row.double("oldest_age")
            }
        }
    }

    struct RecentFailures: Query {
        static let name = "recentFailures"

        struct Row: QueryRow {
            static let columns = ["code", "count", "latest_message", "last_seen"]
            var failure: (code: String, count: Int, latestMessage: String, lastSeen: String)

            init?(_ row: RowReader) {
                failure = (row.text("code") ?? "?", row.int("count") ?? 0, row.text("latest_message") ?? "", row.instant("last_seen") ?? "")
            }
        }
    }

    struct ThroughputWindows: Query {
        static let name = "throughputWindows"

        struct Row: QueryRow {
            static let columns = ["m1", "m5", "m15"]
            var m1: Int, m5: Int, m15: Int

            init?(_ row: RowReader) {
                m1 = row.int("m1") ?? 0
                m5 = row.int("m5") ?? 0
                m15 = row.int("m15") ?? 0
            }
        }
    }

    struct PruneBatch: Query {
        static let name = "pruneBatch"
        var states: [JobState]
        var olderThan: Duration
        var limit: Int

        func bind(_ p: inout QueryParameters) {
            p.add(states.map(\.rawValue))
            p.add(olderThan)
            p.add(limit)
        }

        struct Row: QueryRow {
            static let columns = ["state"]
            var state: JobState?
            init?(_ row: RowReader) { state = row.text("state").flatMap(JobState.init(rawValue:)) }
        }
    }

    struct RecordPrune: Query {
        static let name = "recordPrune"
        var by: String
        var pruned: [JobState: Int]
        var took: Duration

        func bind(_ p: inout QueryParameters) {
            p.add(by)
            p.add(pruned[.succeeded] ?? 0)
            p.add(pruned[.failed] ?? 0)
            p.add(pruned[.cancelled] ?? 0)
            p.add(took)
        }
    }

    struct LatestPrune: Query {
        static let name = "latestPrune"

        struct Row: QueryRow {
            static let columns = ["pruned_by", "succeeded", "failed", "cancelled", "age"]
            var prune: QueueStatus.PruneState

            init?(_ row: RowReader) {
                prune = QueueStatus.PruneState(
                    prunedBy: row.text("pruned_by") ?? "", succeeded: row.int("succeeded") ?? 0, failed: row.int("failed") ?? 0,
                    cancelled: row.int("cancelled") ?? 0, age: row.double("age") ?? 0)
            }
        }
    }

    struct RecordSweep: Query {
        static let name = "recordSweep"
        var record: JobQueue.SweepRecord

        func bind(_ p: inout QueryParameters) {
            p.add(record.sweptBy)
            p.add(record.storeRoot)
            p.add(record.keptFiles)
            p.add(record.keptBytes)
            p.add(record.sizeLimit)
            p.add(record.removedFiles)
            p.add(record.removedKeys)
            p.add(record.freedBytes)
            p.add(record.took)
        }
    }

    struct LatestSweep: Query {
        static let name = "latestSweep"

        struct Row: QueryRow {
            static let columns = ["swept_by", "store_root", "kept_files", "kept_bytes", "size_limit", "age"]
            var store: QueueStatus.StoreState

            init?(_ row: RowReader) {
                store = QueueStatus.StoreState(
                    root: row.text("store_root") ?? "", files: row.int64("kept_files") ?? 0, bytes: row.int64("kept_bytes") ?? 0,
                    sizeLimit: row.int64("size_limit"), sweptBy: row.text("swept_by") ?? "", age: row.double("age") ?? 0)
            }
        }
    }
}
