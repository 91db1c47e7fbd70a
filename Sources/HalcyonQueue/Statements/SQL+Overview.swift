// overview.sql: the dashboard's bounded reads.

extension SQL {
    struct OverviewCounts: Query {
        static let name = "overviewCounts"
        var cap: Int
        func bind(_ p: inout QueryParameters) { p.add(cap) }

        struct Row: QueryRow {
            static let columns = ["state", "queue", "count"]
            var state: JobState
            var queue: String
            var count: Int

            init?(_ row: RowReader) {
                guard let state = row.text("state").flatMap(JobState.init(rawValue:)), let queue = row.text("queue"), let n = row.int("count")
                else { return nil }
                self.state = state
                self.queue = queue
                count = n
            }
        }
    }

    struct TableEstimate: Query {
        static let name = "tableEstimate"

        struct Row: QueryRow {
            static let columns = ["bytes", "tuples", "pages", "block"]
            var bytes: Int64
            /// -1: never analyzed.
            var tuples: Double
            var pages: Double
            var block: Double

            init?(_ row: RowReader) {
                bytes = row.int64("bytes") ?? 0
                tuples = row.double("tuples") ?? -1
                pages = row.double("pages") ?? 0
                block = row.double("block") ?? 8192
            }
        }
    }

    struct SucceededCount: Query {
        typealias Row = CountRow
        static let name = "succeededCount"
    }

    struct QueueList: Query {
        static let name = "queueList"
        var limit: Int
        func bind(_ p: inout QueryParameters) { p.add(limit) }

        struct Row: QueryRow {
            static let columns = ["name", "paused", "paused_for"] + SQL.limitColumns
            var name: String
            var paused: Bool
            var pausedFor: Double?
            var limits: QueueLimits

            init?(_ row: RowReader) {
                guard let name = row.text("name") else { return nil }
                self.name = name
                paused = row.bool("paused") ?? false
                pausedFor = row.double("paused_for")
                limits = QueueLimits(row)
            }
        }
    }

    struct ThroughputByMinute: Query {
        static let name = "throughputByMinute"
        var limit: Int
        func bind(_ p: inout QueryParameters) { p.add(limit) }

        struct Row: QueryRow {
            static let columns = ["minute", "succeeded", "failed", "cancelled", "finished"]
            var minute: QueueOverview.Minute
            var finished: Int

            init?(_ row: RowReader) {
                guard let start = row.int64("minute") else { return nil }
                minute = QueueOverview.Minute(
                    start: start, succeeded: row.int("succeeded") ?? 0, failed: row.int("failed") ?? 0, cancelled: row.int("cancelled") ?? 0)
                finished = row.int("finished") ?? 0
            }
        }
    }

    struct FailuresByCode: Query {
        static let name = "failuresByCode"
        var limit: Int
        func bind(_ p: inout QueryParameters) { p.add(limit) }

        struct Row: QueryRow {
            static let columns = ["code", "count", "latest_message", "last_seen", "latest_id", "read_rows"]
            var failure: QueueOverview.Failure
            var readRows: Int?

            init?(_ row: RowReader) {
                failure = QueueOverview.Failure(
                    code: row.text("code") ?? "?", count: row.int("count") ?? 0, latestMessage: row.text("latest_message") ?? "",
                    lastSeen: row.instant("last_seen") ?? "", latestJob: row.int64("latest_id"))
                readRows = row.int("read_rows")
            }
        }
    }

    struct ListJobs: Query {
        static let name = "listJobs"
        var filter: JobQueue.JobFilter
        var before: Int64?
        var limit: Int
        var slots: [String: QuerySlot] { filter.slots }

        func bind(_ p: inout QueryParameters) {
            filter.bind(&p)
            p.add(before)
            p.add(limit)
        }

        struct Row: QueryRow {
            static let columns = [
                "id", "state", "queue", "source", "processors", "attempt", "max_attempts", "created_at", "finished_at", "code", "last_error",
                "result_digest", "result_format", "result_width", "result_height", "result_bytes", "cache_hit", "tags",
            ]
            var job: JobQueue.ListedJob

            init?(_ row: RowReader) {
                guard let j = JobRow(row), let state = j.state else { return nil }
                job = JobQueue.ListedJob(
                    id: j.id, state: state, queue: j.queue ?? "", source: j.source ?? "", processors: j.processors ?? "",
                    attempt: j.attempt ?? 0, maxAttempts: j.maxAttempts ?? 0, createdAt: j.createdAt ?? "", finishedAt: j.finishedAt,
                    code: row.text("code"), lastError: j.lastError, resultDigest: j.resultDigest, resultFormat: j.resultFormat,
                    resultWidth: j.resultWidth, resultHeight: j.resultHeight, resultBytes: j.resultBytes, cacheHit: j.cacheHit, tags: j.tags ?? [])
            }
        }
    }

    struct CountFilteredCapped: Query {
        typealias Row = CountRow
        static let name = "countFilteredCapped"
        var filter: JobQueue.JobFilter
        var cap: Int
        var slots: [String: QuerySlot] { filter.slots }

        func bind(_ p: inout QueryParameters) {
            filter.bind(&p)
            p.add(cap)
        }
    }
}
