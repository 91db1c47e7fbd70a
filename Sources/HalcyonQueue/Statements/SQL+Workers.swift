// workers.sql, duties.sql, callbacks.sql: what a worker does besides its jobs.

extension SQL {
    struct RegisterWorker: Query {
        static let name = "registerWorker"
        var id: String
        var host: String
        var pid: Int
        var concurrency: Int

        func bind(_ p: inout QueryParameters) {
            p.add(id)
            p.add(host)
            p.add(pid)
            p.add(concurrency)
        }
    }

    struct HeartbeatWorker: Query {
        static let name = "heartbeatWorker"
        var id: String
        var done: Int
        var failed: Int

        func bind(_ p: inout QueryParameters) {
            p.add(id)
            p.add(done)
            p.add(failed)
        }
    }

    struct StopWorker: Query {
        static let name = "stopWorker"
        var id: String
        func bind(_ p: inout QueryParameters) { p.add(id) }
    }

    struct HeldJobs: Query {
        static let name = "heldJobs"
        var workerID: String
        func bind(_ p: inout QueryParameters) { p.add(workerID) }

        struct Row: QueryRow {
            static let columns = ["id", "attempt", "crashes", "claimed_at"]
            var job: JobRow
            var crashes: Int
            var claimedAt: String?

            init?(_ row: RowReader) {
                guard let job = JobRow(row), job.attempt != nil else { return nil }
                self.job = job
                crashes = row.int("crashes") ?? 0
                claimedAt = row.text("claimed_at")
            }
        }
    }

    struct RecordRestart: Query {
        static let name = "recordRestart"
        var workerID: String
        var reason: String

        func bind(_ p: inout QueryParameters) {
            p.add(workerID)
            p.add(reason)
        }
    }

    struct WorkerList: Query {
        static let name = "workerList"
        var deadAfter: Duration
        func bind(_ p: inout QueryParameters) { p.add(deadAfter) }

        struct Row: QueryRow {
            static let columns = [
                "id", "host", "pid", "concurrency", "jobs_done", "jobs_failed", "restarts", "last_crash", "heartbeat_age", "status",
            ]
            var worker: QueueOverview.Worker

            init?(_ row: RowReader) {
                guard let id = row.text("id") else { return nil }
                worker = QueueOverview.Worker(
                    id: id, host: row.text("host") ?? "", pid: row.int("pid") ?? 0, concurrency: row.int("concurrency") ?? 0,
                    status: row.text("status").flatMap(QueueOverview.Worker.Status.init(rawValue:)) ?? .dead,
                    heartbeatAge: row.double("heartbeat_age") ?? 0, done: row.int64("jobs_done") ?? 0, failed: row.int64("jobs_failed") ?? 0,
                    restarts: row.int64("restarts") ?? 0, lastCrash: row.text("last_crash"))
            }
        }
    }

    /// `acquireLease` and `renewLease`'s parameters: lease, holder, for how long.
    struct DutyLease: Sendable {
        var name: LeaseName
        var holder: String
        var duration: Duration

        func bind(_ p: inout QueryParameters) {
            p.add(name.rawValue)
            p.add(holder)
            p.add(duration)
        }
    }

    struct AcquireLease: Query {
        static let name = "acquireLease"
        var lease: DutyLease
        func bind(_ p: inout QueryParameters) { lease.bind(&p) }

        struct Row: QueryRow {
            static let columns = ["holder"]
            /// A row when the lease was taken.
            static let unread = Set(columns)
            init?(_ row: RowReader) {}
        }
    }

    struct RenewLease: Query {
        static let name = "renewLease"
        var lease: DutyLease
        func bind(_ p: inout QueryParameters) { lease.bind(&p) }

        struct Row: QueryRow {
            static let columns = ["name"]
            /// A row when the lease was renewed.
            static let unread = Set(columns)
            init?(_ row: RowReader) {}
        }
    }

    struct ReleaseLease: Query {
        static let name = "releaseLease"
        var name: LeaseName
        var holder: String

        func bind(_ p: inout QueryParameters) {
            p.add(name.rawValue)
            p.add(holder)
        }
    }

    struct TakeCallbacks: Query {
        static let name = "takeCallbacks"
        var limit: Int
        var hold: Duration

        func bind(_ p: inout QueryParameters) {
            p.add(limit)
            p.add(hold)
        }

        struct Row: QueryRow {
            static let columns = ["id", "callback_attempts", "url", "message_id", "body", "traceparent", "tracestate", "trace_id"]
            var callback: JobQueue.Callback

            init?(_ row: RowReader) {
                guard let id = row.int64("id"), let attempt = row.int("callback_attempts"), let url = row.text("url"), let body = row.text("body")
                else { return nil }
                callback = JobQueue.Callback(
                    jobID: id, attempt: attempt, url: url, body: body, messageID: row.text("message_id") ?? "job_\(id)",
                    traceparent: row.text("traceparent"), tracestate: row.text("tracestate"), recordedTraceID: row.text("trace_id"))
            }
        }
    }

    struct PutBackCallback: Query {
        typealias Row = IDRow
        static let name = "putBackCallback"
        var callback: JobQueue.Callback
        var dueIn: Duration

        func bind(_ p: inout QueryParameters) {
            p.add(callback.jobID)
            p.add(callback.attempt)
            p.add(dueIn)
        }
    }

    struct CallbackDueSoon: Query {
        static let name = "callbackDueSoon"
        var window: Duration
        func bind(_ p: inout QueryParameters) { p.add(window) }

        struct Row: QueryRow {
            static let columns = ["due"]
            var due: Bool
            init?(_ row: RowReader) { due = row.bool("due") ?? false }
        }
    }

    struct RecordCallback: Query {
        typealias Row = IDRow
        static let name = "recordCallback"
        var callback: JobQueue.Callback
        var outcome: JobQueue.CallbackOutcome

        func bind(_ p: inout QueryParameters) {
            let (status, error, delay): (String, String?, Duration) =
                switch outcome {
                case .delivered: ("delivered", nil, .zero)
                case .retry(let after, let error): ("pending", error, after)
                case .failed(let error): ("failed", error, .zero)
                }
            p.add(callback.jobID)
            p.add(callback.attempt)
            p.add(status)
            p.add(error.map { String($0.prefix(2048)) })
            p.add(delay)
        }
    }
}
