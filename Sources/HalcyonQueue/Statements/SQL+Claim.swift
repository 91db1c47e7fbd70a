import HalcyonDomain
import HalcyonRuntime

// claim.sql, record.sql, leases.sql: a worker's hot path.

extension SQL {
    struct Claim: Query {
        static let name = "claim"
        var workerID: String
        var limit: Int
        var lease: Duration
        var maxBytes: Int
        /// Empty: every queue; a nil limit: the batch size.
        var queues: [(name: String, limit: Int?)]
        var siblings: Bool
        /// False: the queues without a fleet-wide limit; true: those with one, whose rows the
        /// transaction has locked (`LockLimitedQueues`).
        var limited: Bool = false

        func bind(_ p: inout QueryParameters) {
            p.add(workerID)
            p.add(limit)
            p.add(lease)
            p.add(maxBytes)
            p.add(queues.map(\.name))
            p.add(queues.map(\.limit))
            p.add(siblings)
            p.add(limited)
        }

        /// A claimed job (`Job.init(row:)`): its job columns, then the claim's own.
        struct Row: QueryRow {
            static let columns = Job.claimedColumns + ["queue_wait", "claimed_at", "isolated_keys"]
            var job: Job

            init?(_ row: RowReader) {
                guard
                    let job = JobRow(row).flatMap({
                        Job(row: $0, queueWait: row.double("queue_wait"), claimedAt: row.text("claimed_at"), isolatedKeys: row.bool("isolated_keys"))
                    })
                else { return nil }
                self.job = job
            }
        }
    }

    struct LockLimitedQueues: Query {
        typealias Row = NameRow
        static let name = "lockLimitedQueues"
        /// Empty: every queue.
        var queues: [String]
        func bind(_ p: inout QueryParameters) { p.add(queues) }
    }

    struct DrainCheck: Query {
        static let name = "drainCheck"
        var queues: [String]

        func bind(_ p: inout QueryParameters) { p.add(queues) }

        struct Row: QueryRow {
            static let columns = ["runnable", "running"]
            var runnable: Bool
            var running: Bool

            init?(_ row: RowReader) {
                runnable = row.bool("runnable") ?? false
                running = row.bool("running") ?? false
            }
        }
    }

    struct Complete: Query {
        static let name = "complete"
        var workerID: String
        var batch: [(claim: HalcyonQueue.Claim, result: JobResult, timings: StageTimings)]

        func bind(_ p: inout QueryParameters) {
            p.add(workerID)
            p.add(json: .array(batch.map(Self.row)))
        }

        /// One element of $2.
        static func row(_ claim: HalcyonQueue.Claim, _ r: JobResult, _ timings: StageTimings) -> JSONValue {
            [
                "id": .number(Double(claim.id)), "attempt": .number(Double(claim.attempt)),
                "claimed_at": claim.stamp.map { .string($0) } ?? .null,
                "result_key": .string(r.key), "result_digest": .string(r.digest),
                "result_path": .string(r.path), "result_bytes": .number(Double(r.bytes)), "result_width": .number(Double(r.width)),
                "result_height": .number(Double(r.height)), "result_format": .string(r.format), "cache_hit": .bool(r.cacheHit),
                "result_source": r.source.map { .string(SourceLabel.label($0)) } ?? .null, "timings": timings.json,
                "source_width": r.facts.map { .number(Double($0.width)) } ?? .null,
                "source_height": r.facts.map { .number(Double($0.height)) } ?? .null,
                "source_format": r.facts.map { .string($0.format) } ?? .null,
                "source_bytes": r.facts.map { .number(Double($0.bytes)) } ?? .null,
                // JSON text, relayed: the statement casts it.
                "source_meta": r.facts.map { .string($0.metaJSON) } ?? .null, "placeholders": r.placeholdersJSON.map { .string($0) } ?? .null,
                "result_manifest": r.manifestJSON.map { .string($0) } ?? .null,
                "result_quality": ResultMeasures.quality(r.quality).map { .number(Double($0)) } ?? .null,
                "result_quality_exact": ResultMeasures.exactQuality(r.quality, half: r.halfQuality).map { .number($0) } ?? .null,
                "result_score": ResultMeasures.score(r.score).map { .number($0) } ?? .null,
                "result_target_missed": r.targetMissed.map { .bool($0) } ?? .null,
                "result_chroma": r.chroma.map { .string($0.rawValue) } ?? .null,
                "source_pdq": r.sourceHash.map { .string($0.hex) } ?? .null,
                "source_pdq_quality": r.sourceHash.map { .number(Double($0.quality)) } ?? .null,
                "result_pdq": r.outputHash.map { .string($0.hex) } ?? .null,
                "result_pdq_quality": r.outputHash.map { .number(Double($0.quality)) } ?? .null,
                "source_pdq_dihedral": r.sourceVariants.map { .array($0.map { .string($0) }) } ?? .null,
            ]
        }

        struct Row: QueryRow {
            static let columns = ["id", "pg_notify"]
            static let unread: Set = ["pg_notify"]
            var id: Int64

            init?(_ row: RowReader) {
                guard let id = row.int64("id") else { return nil }
                self.id = id
            }
        }
    }

    struct Fail: Query {
        static let name = "fail"
        var claim: HalcyonQueue.Claim
        var workerID: String
        var error: HalcyonError
        var retryDelay: Duration
        var timings: StageTimings

        func bind(_ p: inout QueryParameters) {
            p.add(claim.id)
            p.add(workerID)
            p.add(json: error.errorEntry)
            p.add(error.description.prefix(utf8Bytes: 4096))
            p.add(error.permanent)
            p.add(retryDelay)
            p.add(json: timings.json)
            p.add(claim.attempt)
            p.add(claim.stamp)
        }

        struct Row: QueryRow {
            static let columns = ["state"]
            var state: JobState?

            init?(_ row: RowReader) { state = row.text("state").flatMap(JobState.init(rawValue:)) }
        }
    }

    /// `failRejected` and `markOutcomeRejected`'s parameters.
    struct Rejection: Sendable {
        var claim: HalcyonQueue.Claim
        var workerID: String
        var error: HalcyonError

        func bind(_ p: inout QueryParameters) {
            p.add(claim.id)
            p.add(claim.attempt)
            p.add(workerID)
            p.add(json: error.errorEntry)
            p.add(error.description.prefix(utf8Bytes: 4096))
            p.add(claim.stamp)
        }
    }

    struct FailRejected: Query {
        typealias Row = IDRow
        static let name = "failRejected"
        var rejection: Rejection
        func bind(_ p: inout QueryParameters) { rejection.bind(&p) }
    }

    struct MarkOutcomeRejected: Query {
        typealias Row = IDRow
        static let name = "markOutcomeRejected"
        var rejection: Rejection
        func bind(_ p: inout QueryParameters) { rejection.bind(&p) }
    }

    struct Release: Query {
        typealias Row = IDRow
        static let name = "release"
        var claims: [HalcyonQueue.Claim]
        var workerID: String

        func bind(_ p: inout QueryParameters) {
            p.add(claims.map(\.id))
            p.add(claims.map(\.attempt))
            p.add(workerID)
            p.add(claims.map(\.stamp))
        }
    }

    struct RecordTraceIDs: Query {
        static let name = "recordTraceIDs"
        var claims: [HalcyonQueue.Claim]
        var workerID: String
        var traceIDs: [String]

        func bind(_ p: inout QueryParameters) {
            p.add(claims.map(\.id))
            p.add(claims.map(\.attempt))
            p.add(workerID)
            p.add(traceIDs)
        }
    }

    struct HeartbeatJobs: Query {
        static let name = "heartbeatJobs"
        var claims: [HalcyonQueue.Claim]
        var workerID: String
        var lease: Duration

        func bind(_ p: inout QueryParameters) {
            p.add(claims.map(\.id))
            p.add(claims.map(\.attempt))
            p.add(workerID)
            p.add(lease)
        }

        struct Row: QueryRow {
            static let columns = ["id", "renewed"]
            var id: Int64
            var renewed: Bool

            init?(_ row: RowReader) {
                guard let id = row.int64("id") else { return nil }
                self.id = id
                renewed = row.bool("renewed") ?? false
            }
        }
    }

    /// What `rescue` and `rescueOne` return of each row.
    struct RescuedRow: QueryRow {
        static let columns = ["id", "state"]
        var id: Int64
        var state: JobState?

        init?(_ row: RowReader) {
            guard let id = row.int64("id") else { return nil }
            self.id = id
            state = row.text("state").flatMap(JobState.init(rawValue:))
        }
    }

    /// `rescue` and `expiredLeases`' parameters: at most how many, and which ids to leave out.
    struct ExpiredScan: Sendable {
        var limit: Int
        var excluding: [Int64]

        func bind(_ p: inout QueryParameters) {
            p.add(limit)
            p.add(excluding)
        }
    }

    struct Rescue: Query {
        typealias Row = RescuedRow
        static let name = "rescue"
        var scan: ExpiredScan
        func bind(_ p: inout QueryParameters) { scan.bind(&p) }
    }

    struct ExpiredLeases: Query {
        typealias Row = IDRow
        static let name = "expiredLeases"
        var scan: ExpiredScan
        func bind(_ p: inout QueryParameters) { scan.bind(&p) }
    }

    struct RescueOne: Query {
        typealias Row = RescuedRow
        static let name = "rescueOne"
        var id: Int64
        func bind(_ p: inout QueryParameters) { p.add(id) }
    }
}
