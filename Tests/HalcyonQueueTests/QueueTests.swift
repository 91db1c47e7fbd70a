import Foundation
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Logging
import Testing

@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct SchemaTests {
    @Test(arguments: [
        "INSERT INTO halcyon.jobs (source) VALUES ('')",
        "INSERT INTO halcyon.jobs (source) VALUES ('   ')",
        "INSERT INTO halcyon.jobs (source) VALUES ('ftp://example.com/a.jpg')",
        "INSERT INTO halcyon.jobs (source) VALUES ('example.com/a.jpg')",
        "INSERT INTO halcyon.jobs (source, max_attempts) VALUES ('https://example.com/a.jpg', 0)",
        "INSERT INTO halcyon.jobs (source, options) VALUES ('https://example.com/a.jpg', '[]')",
        "INSERT INTO halcyon.jobs (source, options) VALUES ('https://example.com/a.jpg', '\"x\"')",
        "INSERT INTO halcyon.jobs (source, fallback_sources) VALUES ('https://example.com/a.jpg', '{gopher://x}')",
        "SELECT halcyon.enqueue('mailto:someone')",
    ])
    func checksRejectNonsenseAtInsert(sql: String) async throws {
        let db = try await TestDatabase.create()
        await #expect {
            try await db.query(sql)
        } throws: { error in
            (error as? DatabaseError)?.sqlState == "23514"  // check_violation
        }
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.jobs").value(0, "n") == "0")
    }

    @Test func enqueueTakesNamedArgumentsAndDefaults() async throws {
        let db = try await TestDatabase.create()
        let id = try await db.query(
            """
            SELECT halcyon.enqueue('https://example.com/a.jpg', processors => 'resize(10x10)', priority => 3,
                                   options => '{"expiration": "1d"}') AS id
            """
        ).value(0, "id")
        let row = try await db.query(
            "SELECT state::text, processors, priority, max_attempts, options::text, fallback_sources, attempt FROM halcyon.jobs WHERE id = $1::bigint",
            [id])
        #expect(row.value(0, "state") == "queued")
        #expect(row.value(0, "processors") == "resize(10x10)")
        #expect(row.value(0, "priority") == "3")
        #expect(row.value(0, "max_attempts") == "\(Job.defaultMaxAttempts)")
        #expect(row.value(0, "fallback_sources") == "{}")
        #expect(row.value(0, "attempt") == "0")
        #expect(row.value(0, "options") == #"{"expiration": "1d"}"#)
    }

    /// `Job.defaultMaxAttempts` (the Swift side's default) is the table's and the enqueue
    /// functions': the migrations say it in SQL, and a change to one without the other fails here.
    @Test func theSwiftMaxAttemptsDefaultIsTheSchemas() async throws {
        let db = try await TestDatabase.create()
        let column = try await db.query(
            """
            SELECT column_default FROM information_schema.columns
            WHERE table_schema = 'halcyon' AND table_name = 'jobs' AND column_name = 'max_attempts'
            """)
        #expect(column.value(0, "column_default") == "\(Job.defaultMaxAttempts)")
        let parameters = try await db.query(
            """
            SELECT DISTINCT parameter_default FROM information_schema.parameters
            WHERE specific_schema = 'halcyon' AND parameter_name = 'max_attempts'
            """)
        #expect(parameters.rows.map { $0[0] } == ["\(Job.defaultMaxAttempts)"])
    }

    @Test func viewsAnswer() async throws {
        let db = try await TestDatabase.create()
        let counts = try await db.query("SELECT state::text, count FROM halcyon.job_counts")
        #expect(counts.rows.map { $0[0] ?? "" } == ["queued", "running", "succeeded", "failed", "cancelled"])
        _ = try await db.query("SELECT * FROM halcyon.recent_failures")
        _ = try await db.query("SELECT * FROM halcyon.throughput")
    }

    /// The listener calls back once with no payloads when it starts listening (and after each
    /// reconnection); only a NOTIFY brings payloads. So the start-up call is waited for first,
    /// and the wake-up counted is one that carries the INSERT trigger's notification.
    @Test func insertNotifiesListeners() async throws {
        let db = try await TestDatabase.create()
        let calls = NotifyLog()
        let listener = JobListener(conninfo: db.conninfo, channel: JobListener.channel, logger: .init(label: "test")) { calls.append($0) }
        listener.start()
        defer { listener.stop() }
        #expect(try await waitUntil(120) { calls.startUps > 0 }, "the listener never started listening")
        #expect(calls.notifications == 0, "a notification before anything was inserted")
        try await db.query("SELECT halcyon.enqueue('https://example.com/n.jpg')")
        #expect(try await waitUntil(120) { calls.notifications > 0 }, "no NOTIFY reached the listener after an INSERT: \(calls.all)")
        #expect(calls.all.contains([""]), "the trigger's notification has an empty payload: \(calls.all)")
    }
}

/// What a `JobListener` called back with: `[]` once listening, the payloads of each NOTIFY.
final class NotifyLog: @unchecked Sendable {
    private let lock = NSLock()
    private var calls: [[String]] = []
    func append(_ payloads: [String]) { lock.lock(); calls.append(payloads); lock.unlock() }
    var all: [[String]] { lock.lock(); defer { lock.unlock() }; return calls }
    var startUps: Int { all.filter(\.isEmpty).count }
    var notifications: Int { all.filter { !$0.isEmpty }.count }
}

@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"), .processes)
struct MigrationTests {
    @Test func migrateIsIdempotent() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let c = try await db.connect()
        let migrations = try Migrator.load(from: TestEnvironment.migrationsDirectory)
        let first = try await Migrator.migrate(c, migrations: migrations)
        #expect(first == migrations.map(\.name))
        let second = try await Migrator.migrate(c, migrations: migrations)
        #expect(second.isEmpty)
        #expect(try await Migrator.appliedVersions(c) == migrations.map(\.version))
    }

    @Test func threeConcurrentMigrateProcessesAreHarmless() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let processes = try (0..<3).map { _ in try HalcyonProcess(["migrate"], conninfo: db.conninfo) }
        for p in processes {
            let status = await p.wait(timeout: 180)
            #expect(status == 0, "migrate output: \(p.output)")
        }
        let applied = try await db.query("SELECT count(*) AS n FROM halcyon.schema_migrations")
        let files = try Migrator.load(from: TestEnvironment.migrationsDirectory)
        #expect(applied.value(0, "n") == String(files.count))
        let outputs = processes.map(\.output)
        #expect(outputs.filter { $0.contains("applied:") }.count == 1)
        #expect(outputs.filter { $0.contains("up to date") }.count == 2)
    }
}

@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct ClaimTests {
    func enqueue(_ db: TestDatabase, _ n: Int, maxAttempts: Int = 5) async throws -> [Int64] {
        let q = JobQueue(connection: try await db.connect())
        return try await q.enqueue(
            batch: (0..<n).map { i in
                var j = JobQueue.NewJob(source: "https://example.com/\(i).jpg")
                j.maxAttempts = maxAttempts
                return j
            }
        ).map(\.id)
    }

    @Test func concurrentClaimersNeverOverlap() async throws {
        let db = try await TestDatabase.create()
        _ = try await enqueue(db, 300)
        let claimed = try await withThrowingTaskGroup(of: [Int64].self) { group in
            for w in 0..<4 {
                group.addTask {
                    let q = JobQueue(connection: try await db.connect())
                    var mine: [Int64] = []
                    while true {
                        let jobs = try await q.claim(workerID: "w\(w)", limit: 7, lease: .seconds(30))
                        if jobs.isEmpty { return mine }
                        mine += jobs.map(\.id)
                    }
                }
            }
            return try await group.reduce(into: [Int64]()) { $0 += $1 }
        }
        #expect(claimed.count == 300)
        #expect(Set(claimed).count == 300)
        let running = try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE state = 'running' AND attempt = 1")
        #expect(running.value(0, "n") == "300")
    }

    @Test func claimOrdersByPriorityThenRunAt() async throws {
        let db = try await TestDatabase.create()
        try await db.query("SELECT halcyon.enqueue('https://e.com/low', priority => 0)")
        try await db.query("SELECT halcyon.enqueue('https://e.com/high', priority => 9)")
        try await db.query("SELECT halcyon.enqueue('https://e.com/later', priority => 99, run_at => now() + interval '1 hour')")
        let q = JobQueue(connection: try await db.connect())
        let jobs = try await q.claim(workerID: "w", limit: 10, lease: .seconds(30))
        #expect(jobs.map(\.source) == ["https://e.com/high", "https://e.com/low"])
    }

    /// A claim is its id, attempt and stamp: after a release gives the attempt back, the same
    /// worker's next claim has the same id, attempt and worker id, and an outcome of the earlier
    /// claim (arriving late) is refused — success, failure and release alike — while the new
    /// claim's own outcome is recorded.
    @Test func anOutcomeOfAnEarlierClaimIsRefusedAfterTheJobWasClaimedAgain() async throws {
        let db = try await TestDatabase.create()
        try await db.query("SELECT halcyon.enqueue('https://e.com/a')")
        let q = JobQueue(connection: try await db.connect())
        let first = try #require(try await q.claim(workerID: "w", limit: 1, lease: .seconds(30)).first)
        #expect(try await q.release([first.claim], workerID: "w") == 1)
        let second = try #require(try await q.claim(workerID: "w", limit: 1, lease: .seconds(30)).first)
        #expect(second.id == first.id && second.attempt == first.attempt && second.claim.stamp != first.claim.stamp)
        let result = JobResult(key: "k", digest: "d", path: "p", bytes: 1, width: 1, height: 1, format: "png", cacheHit: false, source: nil)
        #expect(try await q.complete(first.claim, workerID: "w", result: result) == false)
        #expect(try await q.fail(first.claim, workerID: "w", error: HalcyonError(.internal, "late"), retryDelay: .zero) == .notOwned)
        #expect(try await q.release([first.claim], workerID: "w") == 0)
        #expect(try await q.complete(second.claim, workerID: "w", result: result))
        let row = try await db.query("SELECT state::text AS state, jsonb_array_length(errors) AS errors FROM halcyon.jobs")
        #expect(row.value(0, "state") == "succeeded" && row.value(0, "errors") == "0", "\(row.dictionaries)")
    }

    /// A rescue's error entry names a long source (an inline data: URI) as the workers' entries
    /// do, and so does `result_source`: its first 64 characters and its size, not the whole of it.
    @Test func aRescueEntryNamesALongSourceByItsStartAndSize() async throws {
        let db = try await TestDatabase.create()
        let source = "data:image/png;base64," + String(repeating: "A", count: 100_000)
        try await db.query("SELECT halcyon.enqueue($1)", [source])
        let q = JobQueue(connection: try await db.connect())
        #expect(try await q.claim(workerID: "w", limit: 1, lease: .milliseconds(10)).count == 1)
        try await Task.sleep(for: .milliseconds(50))
        #expect(try await q.rescueExpired().count == 1)
        let entry = try await db.query("SELECT errors->-1->>'source' AS source FROM halcyon.jobs")
        #expect(entry.value(0, "source") == SourceLabel.label(source), "\(entry.value(0, "source")?.prefix(200) ?? "")")
        // So does the result's source (which a webhook body carries).
        let job = try #require(try await q.claim(workerID: "w", limit: 1, lease: .seconds(30)).first)
        let result = JobResult(key: "k", digest: "d", path: "p", bytes: 1, width: 1, height: 1, format: "png", cacheHit: false, source: source)
        #expect(try await q.complete(job.claim, workerID: "w", result: result))
        #expect(try await db.query("SELECT result_source FROM halcyon.jobs").value(0, "result_source") == SourceLabel.label(source))
    }

    /// A source's variants enqueued together are claimed together (one download, one decode),
    /// even by a claim of one; not past the reach, not another queue's, not a limited queue's.
    @Test func aClaimTakesTheQueuedSiblingsOfItsSources() async throws {
        let db = try await TestDatabase.create()
        for chain in ["resize(10x10)", "resize(20x20)", "resize(30x30)"] {
            try await db.query("SELECT halcyon.enqueue('https://e.com/a', processors => $1)", [chain])
        }
        try await db.query("SELECT halcyon.enqueue('https://e.com/b')")
        try await db.query("SELECT halcyon.enqueue('https://e.com/a', queue => 'other')")
        try await db.query("SELECT halcyon.enqueue('https://e.com/a', run_at => now() + interval '1 hour')")
        let q = JobQueue(connection: try await db.connect())
        let first = try await q.claim(workerID: "w", limit: 1, lease: .seconds(30))
        #expect(first.map(\.processors) == ["resize(10x10)", "resize(20x20)", "resize(30x30)"])
        #expect(Set(first.map(\.source)) == ["https://e.com/a"])
        #expect(try await q.claim(workerID: "w", limit: 1, lease: .seconds(30)).map(\.source) == ["https://e.com/b"])
        // Beyond the reach: a fourth job of the source, 20 ids later, is not a sibling.
        for _ in 0..<20 { try await db.query("SELECT halcyon.enqueue('https://e.com/filler', queue => 'filler')") }
        try await db.query("SELECT halcyon.enqueue('https://e.com/b')")
        let both = try await q.claim(workerID: "w", limit: 1, lease: .seconds(30), queues: [("default", nil)])
        #expect(both.count == 1)
        // A queue the worker limits gets no siblings: its limit is a count of jobs.
        for _ in 0..<3 { try await db.query("SELECT halcyon.enqueue('https://e.com/c', queue => 'thumbs')") }
        #expect(try await q.claim(workerID: "w", limit: 5, lease: .seconds(30), queues: [("thumbs", 1)]).count == 1)
        #expect(try await q.claim(workerID: "w", limit: 1, lease: .seconds(30), queues: [("thumbs", nil)]).count == 2)
    }

    @Test func transientFailureBacksOffThenFailsAtMaxAttempts() async throws {
        let db = try await TestDatabase.create()
        let ids = try await enqueue(db, 1, maxAttempts: 2)
        let q = JobQueue(connection: try await db.connect())
        let transient = HalcyonError(.httpStatus, "HTTP 503", permanent: false, source: "https://example.com/0.jpg")

        #expect(try await q.claim(workerID: "w", limit: 1, lease: .seconds(30)).count == 1)
        #expect(try await q.fail(Claim(id: ids[0], attempt: 1), workerID: "w", error: transient, retryDelay: .seconds(3600)) == .retryScheduled)
        var row = try await db.query(
            "SELECT state::text, run_at > now() + interval '50 minutes' AS later, jsonb_array_length(errors) AS n, last_error FROM halcyon.jobs")
        #expect(row.value(0, "state") == "queued")
        #expect(row.value(0, "later") == "t")
        #expect(row.value(0, "n") == "1")
        #expect(row.value(0, "last_error") == "fetch.http_status: HTTP 503")
        // Not runnable before its run_at.
        #expect(try await q.claim(workerID: "w", limit: 1, lease: .seconds(30)).isEmpty)

        try await db.query("UPDATE halcyon.jobs SET run_at = now()")
        #expect(try await q.claim(workerID: "w", limit: 1, lease: .seconds(30)).first?.attempt == 2)
        #expect(try await q.fail(Claim(id: ids[0], attempt: 2), workerID: "w", error: transient, retryDelay: .seconds(60)) == .failed)
        row = try await db.query("SELECT state::text, finished_at IS NOT NULL AS done, errors::text FROM halcyon.jobs")
        #expect(row.value(0, "state") == "failed")
        #expect(row.value(0, "done") == "t")
        let errors = JSONValue.parse(row.value(0, "errors") ?? "")?.arrayValue ?? []
        #expect(errors.count == 2)
        #expect(errors.map { $0["attempt"]?.numberValue } == [1, 2])
        #expect(errors.allSatisfy { $0["code"]?.stringValue == "fetch.http_status" && $0["at"] != nil && $0["source"] != nil })
    }

    @Test func permanentFailureFailsAtOnce() async throws {
        let db = try await TestDatabase.create()
        let ids = try await enqueue(db, 1)
        let q = JobQueue(connection: try await db.connect())
        _ = try await q.claim(workerID: "w", limit: 1, lease: .seconds(30))
        let outcome = try await q.fail(
            Claim(id: ids[0], attempt: 1), workerID: "w", error: HalcyonError(.invalidChain, "at column 1: …"), retryDelay: .seconds(1))
        #expect(outcome == .failed)
        #expect(try await db.query("SELECT attempt FROM halcyon.jobs").value(0, "attempt") == "1")
    }

    @Test func onlyTheLeaseHolderCanFinishAJob() async throws {
        let db = try await TestDatabase.create()
        let ids = try await enqueue(db, 1)
        let q = JobQueue(connection: try await db.connect())
        _ = try await q.claim(workerID: "owner", limit: 1, lease: .seconds(30))
        let result = JobResult(key: "k", digest: "d", path: "p", bytes: 1, width: 1, height: 1, format: "png", cacheHit: false, source: nil)
        let claim = Claim(id: ids[0], attempt: 1)
        #expect(try await q.complete(claim, workerID: "intruder", result: result) == false)
        #expect(try await q.fail(claim, workerID: "intruder", error: HalcyonError(.timeout, "t"), retryDelay: .seconds(1)) == .notOwned)
        #expect(try await q.release([claim], workerID: "intruder") == 0)
        #expect(try await q.complete(claim, workerID: "owner", result: result) == true)
        #expect(try await q.complete(claim, workerID: "owner", result: result) == false)  // already finished
    }

    @Test func releaseGivesTheAttemptBack() async throws {
        let db = try await TestDatabase.create()
        let ids = try await enqueue(db, 3)
        let q = JobQueue(connection: try await db.connect())
        let claims = try await q.claim(workerID: "w", limit: 3, lease: .seconds(30)).map(\.claim)
        #expect(Set(claims.map(\.id)) == Set(ids))
        #expect(try await q.release(claims, workerID: "w") == 3)
        let r = try await db.query("SELECT count(*) FILTER (WHERE state = 'queued' AND attempt = 0 AND locked_by IS NULL) AS n FROM halcyon.jobs")
        #expect(r.value(0, "n") == "3")
    }

    @Test func rescueRequeuesExpiredLeasesAndFailsExhaustedOnes() async throws {
        let db = try await TestDatabase.create()
        _ = try await enqueue(db, 1, maxAttempts: 3)
        _ = try await enqueue(db, 1, maxAttempts: 1)
        let q = JobQueue(connection: try await db.connect())
        let jobs = try await q.claim(workerID: "dead", limit: 2, lease: .seconds(60))
        #expect(jobs.count == 2)
        #expect(try await q.rescueExpired().isEmpty)  // lease still valid
        // The holder stops renewing: let the lease run out.
        try await db.query("UPDATE halcyon.jobs SET locked_until = now() - interval '1 second'")
        let rescued = try await q.rescueExpired()
        #expect(rescued.count == 2)
        let rows = try await db.query(
            "SELECT max_attempts, state::text, last_error, errors->0->>'code' AS code FROM halcyon.jobs ORDER BY max_attempts")
        #expect(rows.value(0, "state") == "failed")  // max_attempts 1: out of attempts
        #expect(rows.value(1, "state") == "queued")
        #expect(rows.value(1, "code") == "worker.lease_expired")
        #expect(rows.value(1, "last_error")?.hasPrefix("worker.lease_expired:") == true)
        // The stalled worker can no longer finish it.
        let result = JobResult(key: "k", digest: "d", path: "p", bytes: 1, width: 1, height: 1, format: "png", cacheHit: false, source: nil)
        #expect(try await q.complete(jobs[0].claim, workerID: "dead", result: result) == false)
    }

    /// After an outage longer than its lease, a worker may claim a rescued job again: the old
    /// attempt's outcome must not land on the new claim, though the worker id is the same.
    @Test func anOldAttemptCannotRecordOverANewClaimBySameWorker() async throws {
        let db = try await TestDatabase.create()
        _ = try await enqueue(db, 1, maxAttempts: 5)
        let q = JobQueue(connection: try await db.connect())
        let first = try #require(try await q.claim(workerID: "w", limit: 1, lease: .seconds(60)).first).claim
        try await db.query("UPDATE halcyon.jobs SET locked_until = now() - interval '1 second'")
        #expect(try await q.rescueExpired().count == 1)
        let second = try #require(try await q.claim(workerID: "w", limit: 1, lease: .seconds(60)).first).claim
        #expect(second.id == first.id && second.attempt == first.attempt + 1)
        let result = JobResult(key: "k", digest: "d", path: "p", bytes: 1, width: 1, height: 1, format: "png", cacheHit: false, source: nil)
        // Everything the old attempt might still say about the job is refused…
        #expect(try await q.complete(first, workerID: "w", result: result) == false)
        #expect(try await q.fail(first, workerID: "w", error: HalcyonError(.notImage, "x"), retryDelay: .seconds(1)) == .notOwned)
        #expect(try await q.release([first], workerID: "w") == 0)
        #expect(try await q.heartbeat([first], workerID: "w", lease: .seconds(60)).held.isEmpty)
        #expect(
            try await q.recordRejection(first, workerID: "w", outcome: "success", error: DatabaseError(message: "x", connectionLost: false))
                == .notOwned)
        #expect(try await db.query("SELECT state::text FROM halcyon.jobs").value(0, "state") == "running")
        // …and the new claim's own outcome is recorded.
        #expect(try await q.heartbeat([second], workerID: "w", lease: .seconds(60)).renewed == [second.id])
        #expect(try await q.complete(second, workerID: "w", result: result))
    }

    /// A heartbeat does not wait for a row someone else has locked: the other leases are
    /// renewed at once, and the locked one is reported still held, not lost.
    @Test func aHeartbeatSkipsRowsLockedByAnotherSession() async throws {
        let db = try await TestDatabase.create()
        _ = try await enqueue(db, 3)
        let q = JobQueue(connection: try await db.connect(statementTimeout: 5))
        let claims = try await q.claim(workerID: "w", limit: 3, lease: .seconds(60)).map(\.claim).sorted { $0.id < $1.id }
        let holder = try await db.connect()
        try await holder.execute("BEGIN")
        try await holder.execute("SELECT id FROM halcyon.jobs WHERE id = $1::bigint FOR UPDATE", [String(claims[0].id)])
        // Were it to wait for the lock, it would time out (5 s) and throw: the holder lets go only after.
        let renewal = try await q.heartbeat(claims, workerID: "w", lease: .seconds(60))
        #expect(renewal.renewed == [claims[1].id, claims[2].id])
        #expect(renewal.locked == [claims[0].id])
        try await holder.execute("ROLLBACK")
        await holder.close()
    }

    /// PostgreSQL's jsonb cannot hold a NUL: an error message carrying one (quoted from a file)
    /// used to make the failure impossible to record.
    @Test func aFailureWhoseMessageHoldsANulIsRecorded() async throws {
        let db = try await TestDatabase.create()
        _ = try await enqueue(db, 1)
        let q = JobQueue(connection: try await db.connect())
        let claim = try #require(try await q.claim(workerID: "w", limit: 1, lease: .seconds(30)).first).claim
        let error = HalcyonError(.decodeFailed, "improper image header `\u{0}\u{1}PNG'", source: "https://example.com/0.jpg")
        #expect(try await q.fail(claim, workerID: "w", error: error, retryDelay: .seconds(1)) == .failed)
        let row = try await db.query("SELECT errors->0->>'message' AS m, last_error FROM halcyon.jobs")
        #expect(row.value(0, "m") == "improper image header `\u{FFFD}\u{1}PNG'")
        #expect(row.value(0, "last_error") == "image.decode_failed: improper image header `\u{FFFD}\u{1}PNG'")
    }

    @Test func cancelAndRetry() async throws {
        let db = try await TestDatabase.create()
        let ids = try await enqueue(db, 2)
        let q = JobQueue(connection: try await db.connect())
        #expect(try await q.cancel(ids: [ids[0]]) == [ids[0]])
        #expect(try await q.retry(ids: [ids[1]]).isEmpty)  // queued: nothing to retry
        #expect(try await q.retry(ids: [ids[0]]) == [ids[0]])
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE state = 'queued'").value(0, "n") == "2")
    }

    @Test func pruneDeletesOnlyOldFinishedRows() async throws {
        let db = try await TestDatabase.create()
        let ids = try await enqueue(db, 3)
        let q = JobQueue(connection: try await db.connect())
        _ = try await q.cancel(ids: [ids[0], ids[1]])
        try await db.query("UPDATE halcyon.jobs SET finished_at = now() - interval '10 days' WHERE id = $1::bigint", [String(ids[0])])
        #expect(try await q.prune(olderThan: .seconds(7 * 86400), states: [.succeeded, .failed, .cancelled]) == [.cancelled: 1])
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.jobs").value(0, "n") == "2")
    }

    /// A statement past its deadline is cancelled on the server, its connection reset, and the
    /// next statement gets a fresh connection: nothing waits forever on a slow server.
    @Test func aStatementPastItsDeadlineIsCancelledAndTheConnectionRenewed() async throws {
        let db = try await TestDatabase.create()
        let c = try await db.connect(statementTimeout: 0.5)
        let started = ContinuousClock.now
        await #expect {
            try await c.execute("SELECT pg_sleep(600), 'halcyon-deadline-test'")
        } throws: { ($0 as? DatabaseError).map { $0.sqlState == DatabaseError.timedOutState && $0.isTransient } ?? false }
        #expect(ContinuousClock.now - started < .seconds(300))  // of the 600 s sleep; a loaded test process wakes late
        #expect(try await c.execute("SELECT 1 AS one").value(0, "one") == "1")
        // The server stopped the sleep too (the cancel request, or the dropped connection).
        let stopped = try await waitUntil(120) {
            try await db.query(
                "SELECT count(*) AS n FROM pg_stat_activity WHERE query LIKE '%halcyon-deadline-test%' AND pid <> pg_backend_pid() AND state = 'active'"
            ).value(0, "n") == "0"
        }
        #expect(stopped)
        // A per-statement override: no deadline at all.
        #expect(try await c.execute("SELECT pg_sleep(0.7), 2 AS two", timeout: .infinity).value(0, "two") == "2")
        await c.close()
    }

    /// A connection abandoned from another task (its owner stopping) gives up the statement it
    /// waits for within a moment — the server stops it too — and sends no other.
    @Test func anAbandonedConnectionCancelsItsStatementAndSendsNoOther() async throws {
        let db = try await TestDatabase.create()
        let c = try await db.connect(statementTimeout: 600)
        let started = ContinuousClock.now
        let sleeper = Task { try await c.execute("SELECT pg_sleep(600), 'halcyon-abandon-test'") }
        #expect(
            try await waitUntil(60) {
                try await db.query(
                    "SELECT count(*) AS n FROM pg_stat_activity WHERE query LIKE '%halcyon-abandon-test%' AND state = 'active' AND pid <> pg_backend_pid()"
                )
                .value(0, "n") == "1"
            })
        c.abandon()
        await #expect {
            _ = try await sleeper.value
        } throws: { ($0 as? DatabaseError).map { $0.message.contains("abandoned") && $0.isTransient } ?? false }
        #expect(ContinuousClock.now - started < .seconds(300))  // of the 600 s sleep; a loaded test process wakes late
        await #expect(throws: DatabaseError.self) { try await c.execute("SELECT 1") }
        #expect(
            try await waitUntil(120) {
                try await db.query(
                    "SELECT count(*) AS n FROM pg_stat_activity WHERE query LIKE '%halcyon-abandon-test%' AND state = 'active' AND pid <> pg_backend_pid()"
                )
                .value(0, "n") == "0"
            })
    }

    @Test func errorsThatPassAreTransientAndTheRestAreNot() {
        for state in ["40001", "40P01", "55P03", "57014", "53300", "08006", "57P01"] {
            #expect(DatabaseError(message: "", sqlState: state, connectionLost: false).isTransient, "\(state)")
        }
        for state in ["P0001", "23505", "23514", "22P05", "42501", "42P01", "XX000"] {
            #expect(!DatabaseError(message: "", sqlState: state, connectionLost: false).isTransient, "\(state)")
        }
        #expect(DatabaseError(message: "", sqlState: nil, connectionLost: true).isTransient)
    }

    /// One row carries bounded text, and one claim takes in bounded text: a claim of 250 rows
    /// holding inline sources must not bring gigabytes into the worker.
    @Test func rowsAndClaimsAreBoundedInBytes() async throws {
        let db = try await TestDatabase.create()
        let huge = "data:image/png;base64," + String(repeating: "A", count: 15 << 20)
        for (column, value) in [("source", huge), ("cache_key", String(repeating: "k", count: 9000))] {
            await #expect {
                try await db.query(
                    "INSERT INTO halcyon.jobs (source, \(column == "source" ? "processors" : column)) VALUES ($1, $2)",
                    column == "source" ? [value, ""] : ["https://example.com/a.jpg", value])
            } throws: { ($0 as? DatabaseError)?.sqlState == "23514" }
        }
        await #expect {
            try await db.query(
                "INSERT INTO halcyon.jobs (source, fallback_sources) SELECT 'https://example.com/a.jpg', array_agg('https://example.com/' || g) FROM generate_series(1, 17) g"
            )
        } throws: { ($0 as? DatabaseError)?.sqlState == "23514" }
        // Three rows of about 4 MiB each: a 10 MiB claim takes two, a 1 MiB claim still one.
        let four = "data:image/png;base64," + String(repeating: "A", count: 4 << 20)
        for _ in 0..<3 { try await db.query("SELECT halcyon.enqueue($1)", [four]) }
        let q = JobQueue(connection: try await db.connect())
        #expect(try await q.claim(workerID: "w", limit: 10, lease: .seconds(30), maxBytes: 10 << 20).count == 2)
        #expect(try await q.claim(workerID: "w", limit: 10, lease: .seconds(30), maxBytes: 1 << 20).count == 1)
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE state = 'queued'").value(0, "n") == "0")
    }

    /// A job failing transiently for a long time keeps only its latest error entries.
    @Test func errorsKeepTheLatestEntries() async throws {
        let db = try await TestDatabase.create()
        _ = try await enqueue(db, 1, maxAttempts: 1000)
        let q = JobQueue(connection: try await db.connect())
        for attempt in 1...60 {
            let claim = try #require(try await q.claim(workerID: "w", limit: 1, lease: .seconds(30)).first).claim
            #expect(claim.attempt == attempt)
            #expect(try await q.fail(claim, workerID: "w", error: HalcyonError(.timeout, "attempt \(attempt)"), retryDelay: .zero) == .retryScheduled)
        }
        let row = try await db.query(
            "SELECT jsonb_array_length(errors) AS n, errors->0->>'attempt' AS first, errors->-1->>'attempt' AS last FROM halcyon.jobs")
        #expect(row.value(0, "n") == "50" && row.value(0, "first") == "11" && row.value(0, "last") == "60")
    }
}
