import HalcyonRuntime

// queues.sql, presets.sql.

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
            /// A row when the queue was resumed.
            static let unread = Set(columns)
            init?(_ row: RowReader) {}
        }
    }

    struct QueueNames: Query {
        typealias Row = NameRow
        static let name = "queueNames"
    }

    struct QueueIsolatesKeys: Query {
        static let name = "queueIsolatesKeys"
        var queue: String
        func bind(_ p: inout QueryParameters) { p.add(queue) }

        struct Row: QueryRow {
            static let columns = ["isolated_keys"]
            var isolatedKeys: Bool
            init?(_ row: RowReader) { isolatedKeys = row.bool("isolated_keys") ?? false }
        }
    }

    struct QueueCounts: Query {
        static let name = "queueCounts"

        struct Row: QueryRow {
            static let columns = ["queue", "paused", "paused_for"] + SQL.limitColumns + ["state", "count"]
            var queue: String
            var paused: Bool
            var pausedFor: Double?
            var limits: QueueLimits
            /// Nil for a queue without jobs.
            var state: String?
            var count: Int

            init?(_ row: RowReader) {
                guard let queue = row.text("queue") else { return nil }
                self.queue = queue
                paused = row.bool("paused") ?? false
                pausedFor = row.double("paused_for")
                limits = QueueLimits(row)
                state = row.text("state")
                count = row.int("count") ?? 0
            }
        }
    }

    /// The three limit columns of a `halcyon.queues` row.
    static let limitColumns = ["max_running", "max_per_second", "max_running_per_key"]

    struct QueueLimitsOf: Query {
        static let name = "queueLimits"
        var queue: String
        func bind(_ p: inout QueryParameters) { p.add(queue) }

        struct Row: QueryRow {
            static let columns = SQL.limitColumns
            var limits: QueueLimits
            init?(_ row: RowReader) {
                limits = QueueLimits(row)
            }
        }
    }

    struct LimitedQueues: Query {
        static let name = "limitedQueues"
        var most: Int
        func bind(_ p: inout QueryParameters) { p.add(most) }

        struct Row: QueryRow {
            static let columns = ["queue"] + SQL.limitColumns + ["running"]
            var reading: LimitedQueue
            init?(_ row: RowReader) {
                guard let queue = row.text("queue") else { return nil }
                reading = LimitedQueue(queue: queue, limits: QueueLimits(row), running: row.int("running") ?? 0)
            }
        }
    }

    struct SetQueueLimits: Query {
        typealias Row = NameRow
        static let name = "setQueueLimits"
        var queue: String
        var limits: QueueLimits

        func bind(_ p: inout QueryParameters) {
            p.add(queue)
            p.add(limits.maxRunning)
            p.add(limits.maxPerSecond)
            p.add(limits.maxRunningPerKey)
        }
    }

    struct ForgetIdleFairKeys: Query {
        static let name = "forgetIdleFairKeys"
        var limit: Int
        func bind(_ p: inout QueryParameters) { p.add(limit) }

        struct Row: QueryRow {
            static let columns = ["forgotten"]
            var forgotten: Int
            init?(_ row: RowReader) { forgotten = row.int("forgotten") ?? 0 }
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
            if case .object(let o)? = row.json("options").flatMap(JSONValue.parse) { options = o }
            preset = Preset(name: name, processors: processors, options: options)
        }
    }

    struct ListPresets: Query {
        typealias Row = PresetRow
        static let name = "listPresets"
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
}

extension QueueLimits {
    /// A row's `max_running`, `max_per_second` and `max_running_per_key` (`SQL.limitColumns`).
    init(_ row: RowReader) {
        self.init(maxRunning: row.int("max_running"), maxPerSecond: row.double("max_per_second"), maxRunningPerKey: row.int("max_running_per_key"))
    }
}
