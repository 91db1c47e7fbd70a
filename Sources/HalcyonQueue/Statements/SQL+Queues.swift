import HalcyonCore

// queues.sql, presets.sql, overview.sql, migrations.sql, session.sql.

extension SQL {
    /// The row of a statement returning a queue's `name`.
    struct NameRow: QueryRow {
        static let columns = ["name"]
        var name: String
        init?(_ row: RowReader) {
            guard let name = row.text("name") else { return nil }
            self.name = name
        }
    }

    struct PauseQueue: Query {
        typealias Row = NameRow
        static let name = "pauseQueue"
        var queue: String
        func bind(_ p: inout QueryParameters) { p.add(queue) }
    }

    struct ResumeQueue: Query {
        static let name = "resumeQueue"
        var queue: String
        func bind(_ p: inout QueryParameters) { p.add(queue) }

        struct Row: QueryRow {
            static let columns = ["name", "pg_notify"]
            init?(_ row: RowReader) {}
        }
    }

    struct QueueNames: Query {
        typealias Row = NameRow
        static let name = "queueNames"
    }

    struct QueueCounts: Query {
        static let name = "queueCounts"

        struct Row: QueryRow {
            static let columns = ["queue", "paused", "paused_for", "state", "count"]
            var queue: String
            var paused: Bool
            var pausedFor: Double?
            /// Nil for a queue without jobs.
            var state: String?
            var count: Int

            init?(_ row: RowReader) {
                guard let queue = row.text("queue") else { return nil }
                self.queue = queue
                paused = row.bool("paused") ?? false
                pausedFor = row.double("paused_for")
                state = row.text("state")
                count = row.int("count") ?? 0
            }
        }
    }

    /// A count of jobs in one state.
    struct StateCountRow: QueryRow {
        static let columns = ["state", "count"]
        var state: String
        var count: Int
        init?(_ row: RowReader) {
            state = row.text("state") ?? "?"
            count = row.int("count") ?? 0
        }
    }

    struct TagCounts: Query {
        typealias Row = StateCountRow
        static let name = "tagCounts"
        var tag: String
        func bind(_ p: inout QueryParameters) { p.add(tag) }
    }

    struct SetPreset: Query {
        static let name = "setPreset"
        var preset: Preset

        func bind(_ p: inout QueryParameters) {
            p.add(preset.name)
            p.add(preset.processors)
            p.add(json: .object(preset.options))
        }

        struct Row: QueryRow {
            static let columns = ["created"]
            var created: Bool
            init?(_ row: RowReader) { created = row.bool("created") ?? false }
        }
    }

    /// A preset's row.
    struct PresetRow: QueryRow {
        static let columns = ["name", "processors", "options"]
        var preset: Preset

        init?(_ row: RowReader) {
            guard let name = row.text("name"), let processors = row.text("processors") else { return nil }
            var options: [String: JSONValue] = [:]
            if case .object(let o)? = row.text("options").flatMap(JSONValue.parse) { options = o }
            preset = Preset(name: name, processors: processors, options: options)
        }
    }

    struct ListPresets: Query {
        static let name = "listPresets"

        struct Row: QueryRow {
            static let columns = ["name", "processors", "options", "created_at", "updated_at"]
            var preset: Preset
            init?(_ row: RowReader) {
                guard let preset = PresetRow(row)?.preset else { return nil }
                self.preset = preset
            }
        }
    }

    struct DeletePreset: Query {
        typealias Row = NameRow
        static let name = "deletePreset"
        var name: String
        func bind(_ p: inout QueryParameters) { p.add(name) }
    }

    struct PresetsNamed: Query {
        typealias Row = PresetRow
        static let name = "presetsNamed"
        var names: [String]
        func bind(_ p: inout QueryParameters) { p.add(names) }
    }

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
            static let columns = ["name", "paused", "paused_for"]
            var name: String
            var paused: Bool
            var pausedFor: Double?

            init?(_ row: RowReader) {
                guard let name = row.text("name") else { return nil }
                self.name = name
                paused = row.bool("paused") ?? false
                pausedFor = row.double("paused_for")
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
                    lastSeen: row.text("last_seen") ?? "", latestJob: row.int64("latest_id"))
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

    struct MigrationLock: Query {
        static let name = "migrationLock"

        struct Row: QueryRow {
            static let columns = ["pg_advisory_xact_lock"]
            init?(_ row: RowReader) { nil }
        }
    }

    struct CreateSchema: Query {
        static let name = "createSchema"
    }

    struct CreateMigrationsTable: Query {
        static let name = "createMigrationsTable"
    }

    struct MigrationsTableExists: Query {
        static let name = "migrationsTableExists"

        struct Row: QueryRow {
            static let columns = ["e"]
            var exists: Bool
            init?(_ row: RowReader) { exists = row.bool("e") ?? false }
        }
    }

    struct AppliedVersions: Query {
        static let name = "appliedVersions"

        struct Row: QueryRow {
            static let columns = ["version"]
            var version: Int
            init?(_ row: RowReader) {
                guard let v = row.int("version") else { return nil }
                version = v
            }
        }
    }

    struct RecordMigration: Query {
        static let name = "recordMigration"
        var version: Int
        var file: String

        func bind(_ p: inout QueryParameters) {
            p.add(version)
            p.add(file)
        }
    }

    struct Begin: Query {
        static let name = "begin"
    }

    struct Commit: Query {
        static let name = "commit"
    }

    struct Rollback: Query {
        static let name = "rollback"
    }

    struct ListenJobs: Query {
        static let name = "listenJobs"
    }

    struct ListenFinished: Query {
        static let name = "listenFinished"
    }
}
