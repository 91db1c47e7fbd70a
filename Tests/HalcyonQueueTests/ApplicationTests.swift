import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonTestSupport
import Logging
import Synchronization
import Testing

@testable import HalcyonQueue

/// What applications use around the queue (issue #16), against the real PostgreSQL:
/// completion notifications, unique keys, named queues and pausing, tags, bulk operations by
/// filter, waiting, and the additive migration.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct ApplicationTests {
    func queue(_ db: TestDatabase) async throws -> JobQueue { JobQueue(connection: try await db.connect()) }

    func job(_ n: Int, queue: String = QueueName.default, key: String? = nil, tags: [String] = []) -> JobQueue.NewJob {
        var j = JobQueue.NewJob(source: "https://example.com/\(n).jpg")
        j.queue = queue
        j.uniqueKey = key
        j.tags = tags
        return j
    }

    func result(_ key: String) -> JobResult {
        JobResult(key: key, digest: "d", path: "objects/\(key)", bytes: 1, width: 1, height: 1, format: "png", cacheHit: true, source: nil)
    }

    /// Payloads received on `halcyon_job_finished`.
    final class Received: Sendable {
        let payloads = Mutex<[String]>([])
        let listening = Mutex(false)
    }

    /// Listens on `halcyon_job_finished`; returns once listening.
    func listen(_ db: TestDatabase) async throws -> (JobListener, Received) {
        let received = Received()
        let listener = JobListener(conninfo: db.conninfo, channel: JobListener.finishedChannel, logger: .init(label: "test")) { p in
            if p.isEmpty { received.listening.withLock { $0 = true } }
            received.payloads.withLock { $0 += p }
        }
        listener.start()
        let deadline = ContinuousClock.now + .seconds(10)
        while !received.listening.withLock({ $0 }), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        return (listener, received)
    }

    func waitFor(_ received: Received, count: Int, within: Duration = .seconds(10)) async throws -> [[String: JSONValue]] {
        let deadline = ContinuousClock.now + within
        while received.payloads.withLock({ $0.count }) < count, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(200))  // any extra notification would arrive by now
        return received.payloads.withLock { $0 }.compactMap { p -> [String: JSONValue]? in
            if case .object(let o)? = JSONValue.parse(p) { return o }
            return nil
        }
    }

    @Test func finishingNotifiesOncePerJobInTheSameTransactionAndRetriesDoNot() async throws {
        let db = try await TestDatabase.create()
        let (listener, payloads) = try await listen(db)
        defer { listener.stop() }
        let q = try await queue(db)
        let ids = try await q.enqueue(batch: (0..<5).map { job($0, queue: "thumbs") }).map(\.id)
        let claims = try await q.claim(workerID: "w", limit: 5, lease: .seconds(30)).map(\.claim)
        #expect(claims.count == 5)
        // Group commit: three successes in one statement → three notifications. The first has an
        // encoder quality and a score (rounded to two decimals when recorded), the others none.
        var measured = result("k\(ids[0])")
        (measured.format, measured.quality, measured.score) = ("jpeg", 82, 87.314159)
        let results = [measured, result("k\(ids[1])"), result("k\(ids[2])")]
        let done = try await q.complete(batch: zip(claims[0..<3], results).map { ($0, $1, StageTimings()) }, workerID: "w")
        #expect(done.count == 3)
        // A transient failure with attempts left is a retry: no notification.
        #expect(try await q.fail(claims[3], workerID: "w", error: HalcyonError(.timeout, "slow"), retryDelay: .seconds(60)) == .retryScheduled)
        // A permanent failure notifies with its code; a cancel without one.
        #expect(try await q.fail(claims[4], workerID: "w", error: HalcyonError(.notImage, "html", permanent: true), retryDelay: .zero) == .failed)
        _ = try await q.cancel(ids: [ids[3]])
        let got = try await waitFor(payloads, count: 5)
        #expect(got.count == 5, "\(got)")
        let byID = Dictionary(got.map { (Int64($0["id"]?.numberValue ?? 0), $0) }, uniquingKeysWith: { (a: [String: JSONValue], _) in a })
        for id in ids[0..<3] {
            #expect(byID[id]?["state"]?.stringValue == "succeeded")
            #expect(byID[id]?["queue"]?.stringValue == "thumbs")
            #expect(byID[id]?["cache_hit"]?.boolValue == true)
            #expect(byID[id]?["result_key"]?.stringValue == "k\(id)")
            #expect(byID[id]?["code"] == nil)
        }
        #expect(byID[ids[0]]?["result_quality"] == .number(82) && byID[ids[0]]?["result_score"] == .number(87.31))
        #expect(byID[ids[1]]?["result_quality"] == .null && byID[ids[1]]?["result_score"] == .null)
        let row = try #require(try await q.job(id: ids[0]))
        #expect(row.resultQuality == 82 && row.resultScore == 87.31)
        #expect(row.json["result_quality"] == .number(82) && row.json["result_score"] == .number(87.31))
        #expect(byID[ids[4]]?["state"]?.stringValue == "failed")
        #expect(byID[ids[4]]?["code"]?.stringValue == "fetch.not_image")
        #expect(byID[ids[4]]?["result_quality"] == nil, "a failure's payload has no result")
        #expect(byID[ids[3]]?["state"]?.stringValue == "cancelled")
        #expect(byID[ids[3]]?["code"] == nil)
        // A rolled-back outcome notifies nobody.
        let extra = try await q.enqueue(job(9)).id
        let c = try await db.connect()
        try await c.execute("BEGIN")
        try await c.execute("UPDATE halcyon.jobs SET state = 'cancelled' WHERE id = $1::bigint", [String(extra)])
        try await c.execute("ROLLBACK")
        #expect(try await waitFor(payloads, count: 6, within: .seconds(1)).count == 5)
    }

    /// `result_quality` and `result_score` are held to 1–100 and 0–100 by the table, and whatever
    /// a row holds (its constraints dropped) is read back bounded: never a NaN, never a crash.
    @Test func resultMeasuresAreCheckedAndReadBackBounded() async throws {
        let db = try await TestDatabase.create()
        let q = try await queue(db)
        let id = String(try await q.enqueue(job(1)).id)
        for set in ["result_quality = 0", "result_quality = 101", "result_score = -0.5", "result_score = 100.01", "result_score = 'NaN'"] {
            await #expect(throws: DatabaseError.self, "\(set)") {
                try await db.query("UPDATE halcyon.jobs SET \(set) WHERE id = $1::bigint", [id])
            }
        }
        try await db.query("UPDATE halcyon.jobs SET result_quality = 100, result_score = 0 WHERE id = $1::bigint", [id])
        var row = try #require(try await q.job(id: Int64(id)!))
        #expect(row.resultQuality == 100 && row.resultScore == 0)
        try await db.query("ALTER TABLE halcyon.jobs DROP CONSTRAINT jobs_result_quality_range, DROP CONSTRAINT jobs_result_score_range")
        let expected: [(quality: String, score: String, Int?, Double?)] = [
            ("500", "'NaN'", nil, nil), ("-3", "'Infinity'", nil, nil), ("7", "150.5", 7, 100), ("32767", "-2", nil, 0), ("55", "66.666", 55, 66.67),
        ]
        for e in expected {
            try await db.query("UPDATE halcyon.jobs SET result_quality = \(e.quality), result_score = \(e.score) WHERE id = $1::bigint", [id])
            row = try #require(try await q.job(id: Int64(id)!))
            #expect(row.resultQuality == e.2 && row.resultScore == e.3, "\(e)")
            let text = JSONValue.object(row.json).jsonText
            #expect(!text.contains("NaN") && !text.contains("nan") && JSONValue.parse(text) != nil, "\(text)")
        }
    }

    @Test func aUniqueKeyReturnsTheFirstJobWhileItIsUnfinished() async throws {
        let db = try await TestDatabase.create()
        let q = try await queue(db)
        let first = try await q.enqueue(job(1, key: "upload-1234"))
        #expect(first.inserted)
        let again = try await q.enqueue(job(2, key: "upload-1234"))
        #expect(again == .init(id: first.id, inserted: false))
        // The SQL function returns the first id too.
        let sqlID = try await db.query("SELECT halcyon.enqueue('https://example.com/3.jpg', unique_key => 'upload-1234') AS id").value(0, "id")
        #expect(sqlID == String(first.id))
        // A plain INSERT of a duplicate is a unique violation.
        await #expect(throws: DatabaseError.self) {
            try await db.query("INSERT INTO halcyon.jobs (source, unique_key) VALUES ('https://example.com/4.jpg', 'upload-1234')")
        }
        // Within one batch, the second line with a key is a duplicate of the first.
        let batch = try await q.enqueue(batch: [job(5, key: "b"), job(6, key: "b"), job(7)])
        #expect(batch.map(\.inserted) == [true, false, true])
        #expect(batch[1].id == batch[0].id)
        // Once the holder is finished, the key is free again.
        _ = try await q.cancel(ids: [first.id])
        let later = try await q.enqueue(job(8, key: "upload-1234"))
        #expect(later.inserted && later.id != first.id)
        // Retrying the cancelled one would make two unfinished jobs with the key: it stays.
        #expect(try await q.retry(ids: [first.id]).isEmpty)
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE unique_key = 'upload-1234'").value(0, "n") == "2")
    }

    @Test func namedQueuesAreClaimedWithTheirLimitsAndPausedOnesNotAtAll() async throws {
        let db = try await TestDatabase.create()
        let q = try await queue(db)
        _ = try await q.enqueue(batch: (0..<4).map { job($0, queue: "thumbnails") } + (4..<8).map { job($0, queue: "backfill") })
        #expect(Set(try await q.queueNames()) == ["default", "thumbnails", "backfill"])
        // Only the queues named, each at most its limit.
        let claimed = try await q.claim(workerID: "w", limit: 10, lease: .seconds(30), queues: [("thumbnails", nil), ("backfill", 1)])
        #expect(claimed.filter { $0.queue == "thumbnails" }.count == 4)
        #expect(claimed.filter { $0.queue == "backfill" }.count == 1)
        // Paused: nobody claims it, whatever they ask for.
        try await q.pause(queue: "backfill")
        #expect(try await q.claim(workerID: "w", limit: 10, lease: .seconds(30)).isEmpty)
        let drain = try await q.drainState(queues: ["backfill"])
        #expect(!drain.runnable && drain.running)
        try await q.resume(queue: "backfill")
        #expect(try await q.claim(workerID: "w", limit: 10, lease: .seconds(30), queues: [("backfill", nil)]).count == 3)
        // An unknown queue is a clear error that lists the known ones.
        await #expect(throws: QueueError.unknown("nope", known: ["backfill", "default", "thumbnails"])) {
            try await q.pause(queue: "nope")
        }
        // Queue names and tags are checked by the table.
        await #expect(throws: DatabaseError.self) { try await db.query("SELECT halcyon.enqueue('https://e.com/x.jpg', queue => 'bad name')") }
        await #expect(throws: DatabaseError.self) {
            try await db.query("SELECT halcyon.enqueue('https://e.com/x.jpg', tags => array_fill('t'::text, ARRAY[33]))")
        }
        #expect(QueueName.problem("bad name") != nil && QueueName.problem("thumbnails.v2") == nil)
        // A queue's row cannot go while it has unfinished jobs (they would never be claimed).
        await #expect(throws: DatabaseError.self) { try await db.query("DELETE FROM halcyon.queues WHERE name = 'thumbnails'") }
        // A job moved to a new queue registers it.
        try await db.query("UPDATE halcyon.jobs SET queue = 'moved' WHERE queue = 'backfill'")
        #expect(try await q.queueNames().contains("moved"))
    }

    @Test func bulkRetryAndCancelActOnTheirFilterOnly() async throws {
        let db = try await TestDatabase.create()
        let q = try await queue(db)
        let ids = try await q.enqueue(batch: (0..<6).map { job($0, queue: $0 < 3 ? "a" : "b", tags: $0 % 2 == 0 ? ["upload:1"] : []) }).map(\.id)
        let claims = try await q.claim(workerID: "w", limit: 6, lease: .seconds(30)).map(\.claim)
        for c in claims {
            let code: ErrorCode = c.id == ids[0] || c.id == ids[3] ? .httpStatus : .notImage
            _ = try await q.fail(c, workerID: "w", error: HalcyonError(code, "x", permanent: true), retryDelay: .zero)
        }
        try await db.query("UPDATE halcyon.jobs SET finished_at = now() - interval '3 hours' WHERE id = $1::bigint", [String(ids[3])])
        let recent = JobQueue.JobFilter(states: [.failed], code: "fetch.http_status", since: .seconds(3600))
        #expect(try await q.count(recent) == 1)
        #expect(try await q.retry(recent) == 1)
        #expect(try await db.query("SELECT state::text FROM halcyon.jobs WHERE id = $1::bigint", [String(ids[0])]).value(0, "state") == "queued")
        #expect(try await db.query("SELECT state::text FROM halcyon.jobs WHERE id = $1::bigint", [String(ids[3])]).value(0, "state") == "failed")
        // Tag and queue filters; cancel only touches queued or running jobs.
        #expect(try await q.cancel(JobQueue.JobFilter(states: [.queued, .running], tag: "upload:1")) == 1)
        #expect(try await q.count(JobQueue.JobFilter(states: [.failed], queue: "b")) == 3)
        #expect(try await q.retry(JobQueue.JobFilter(states: [.failed, .cancelled], queue: "b", tag: "upload:1")) == 1)
    }

    /// A bulk operation acts on the rows that matched when it started: a row that finishes (fails
    /// again) or is enqueued after its start is not touched by it, so it ends whatever workers and
    /// producers do meanwhile. Of several failed rows with one unique key only the newest goes.
    @Test func bulkOperationsActOnWhatMatchedAtTheirStart() async throws {
        let db = try await TestDatabase.create()
        let q = try await queue(db)
        // Two failed rows with the key 'same' (one unfinished row per key at a time), two others.
        for (source, key) in [("0", "same"), ("2", "key2"), ("3", "key3"), ("1b", "same")] {
            try await db.query("SELECT halcyon.enqueue('https://e.com/\(source)', unique_key => $1)", [key])
            while let c = try await q.claim(workerID: "w", limit: 1, lease: .seconds(30)).first {
                _ = try await q.fail(c.claim, workerID: "w", error: HalcyonError(.notImage, "x", permanent: true), retryDelay: .zero)
            }
        }
        // One "finished" after the operation starts: as a row failing again while it runs would.
        try await db.query("UPDATE halcyon.jobs SET finished_at = now() + interval '1 hour' WHERE source = 'https://e.com/3'")
        try await db.query("SELECT halcyon.enqueue('https://e.com/later', run_at => now())")
        try await db.query("UPDATE halcyon.jobs SET created_at = now() + interval '1 hour' WHERE source = 'https://e.com/later'")
        #expect(try await q.retry(JobQueue.JobFilter(states: [.failed])) == 2, "the newest 'same' and key2")
        let states = try await db.query("SELECT source, state::text FROM halcyon.jobs ORDER BY id").rows.map { "\($0[0] ?? ""):\($0[1] ?? "")" }
        #expect(
            states == [
                "https://e.com/0:failed", "https://e.com/2:queued", "https://e.com/3:failed", "https://e.com/1b:queued",
                "https://e.com/later:queued",
            ], "\(states)")
        #expect(try await q.cancel(JobQueue.JobFilter(states: [.queued])) == 2, "not the job enqueued after the start")
        #expect(try await db.query("SELECT state::text FROM halcyon.jobs WHERE source = 'https://e.com/later'").value(0, "state") == "queued")
    }

    @Test func waitingSeesJobsFinishWithoutPolling() async throws {
        let db = try await TestDatabase.create()
        let q = try await queue(db)
        let ids = try await q.enqueue(batch: [job(1), job(2)]).map(\.id)
        let waiter = JobWaiter(conninfo: db.conninfo, logger: .init(label: "test"))
        // Nothing finishes: a timeout, both unfinished.
        let short = try await waiter.wait(for: ids, timeout: .milliseconds(300))
        #expect(short.timedOut && short.unfinished.count == 2)
        // The recheck is far away: only the notification can end this wait early.
        var patient = waiter
        patient.recheck = .seconds(600)
        let started = ContinuousClock.now
        async let outcome = patient.wait(for: ids + [999_999], timeout: .seconds(600))
        try await Task.sleep(for: .milliseconds(500))
        let claims = try await q.claim(workerID: "w", limit: 2, lease: .seconds(30)).map(\.claim)
        _ = try await q.complete(claims[0], workerID: "w", result: result("x"))
        _ = try await q.fail(claims[1], workerID: "w", error: HalcyonError(.notImage, "x", permanent: true), retryDelay: .zero)
        let o = try await outcome
        // Not timed out (600 s) with the recheck 10 minutes away: the notifications ended it.
        #expect(ContinuousClock.now - started < .seconds(300))
        #expect(!o.timedOut && !o.allSucceeded)
        #expect(o.missing == [999_999])
        #expect(o.finished[ids[0]]?.state == .succeeded && o.finished[ids[1]]?.state == .failed)
        #expect(o.finished[ids[1]]?.code == "fetch.not_image")
    }

    @Test func migrationFromThePreviousVersionKeepsEveryRow() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let c = try await db.connect()
        let all = try Migrator.load(from: TestEnvironment.migrationsDirectory)
        _ = try await Migrator.migrate(c, migrations: all.filter { $0.version <= 3 })
        try await c.execute(
            """
            INSERT INTO halcyon.jobs (source, processors, state, options, errors, last_error, finished_at, priority)
            VALUES ('https://example.com/a.jpg', 'resize(10x10)', 'queued', '{"expiration": "1d"}', '[]', NULL, NULL, 3),
                   ('https://example.com/b.jpg', '', 'failed', '{}', '[{"code": "fetch.http_status"}]', 'fetch.http_status: x', now(), 0)
            """)
        let before = try await c.execute(
            "SELECT id, source, processors, state::text, options::text, errors::text, priority FROM halcyon.jobs ORDER BY id")
        _ = try await Migrator.migrate(c, migrations: all)
        let after = try await c.execute(
            "SELECT id, source, processors, state::text, options::text, errors::text, priority FROM halcyon.jobs ORDER BY id")
        #expect(after.rows == before.rows)
        let added = try await c.execute("SELECT DISTINCT queue, tags::text, unique_key, callback_status FROM halcyon.jobs")
        #expect(added.rows == [["default", "{}", nil, nil]])
        // The old rows are claimable from their queue.
        #expect(try await JobQueue(connection: c).claim(workerID: "w", limit: 5, lease: .seconds(30), queues: [("default", nil)]).count == 1)
        await c.close()
    }

    /// A webhook body stays under its documented cap with every field at its largest and full of
    /// characters JSON must escape; a failed job's error comes without its per-source list.
    @Test func aWebhookBodyIsBoundedWhateverTheRowHolds() async throws {
        let db = try await TestDatabase.create()
        let q = try await queue(db)
        let control = String(repeating: "\u{1}", count: 8192)
        var jobs: [JobQueue.NewJob] = []
        for n in 0..<2 {
            var j = job(n, tags: (0..<32).map { "\($0)" + String(repeating: "\"", count: 126) })
            j.cacheKey = control
            j.options = #"{"callback_url": "https://hooks.example/h"}"#
            jobs.append(j)
        }
        _ = try await q.enqueue(batch: jobs)
        let claims = try await q.claim(workerID: "w", limit: 2, lease: .seconds(30)).map(\.claim)
        try #require(claims.count == 2)
        let identifier = String(repeating: "\\", count: 65536)
        let digest = String(repeating: "ab", count: 32)
        var stored = JobResult(
            key: control + "@" + identifier, digest: digest, path: "objects/ab/ab/\(digest).jpg", bytes: 1, width: 1, height: 1, format: "jpeg",
            cacheHit: false, source: "data:" + String(repeating: "\u{2}", count: 14 << 10), quality: 82, score: 87.31)
        stored.targetMissed = true
        stored.chroma = .half
        stored.halfQuality = true
        _ = try await q.complete(claims[0], workerID: "w", result: stored)
        let sources = (0..<17).map {
            SourceFailure(
                source: "data:" + String(repeating: "\u{2}", count: 14 << 10) + "\($0)", code: .notImage,
                message: String(repeating: "\"", count: 4096), attempts: 3, permanent: true)
        }
        let error = HalcyonError(
            .notImage, String(repeating: "\u{3}", count: 4096), permanent: true, source: "data:" + String(repeating: "\u{2}", count: 14 << 10),
            sources: sources)
        #expect(try await q.fail(claims[1], workerID: "w", error: error, retryDelay: .zero) == .failed)
        let taken = try await q.takeCallbacks(limit: 10, hold: .seconds(30))
        #expect(taken.count == 2)
        for callback in taken {
            #expect(callback.body.utf8.count <= JobQueue.maxCallbackBodyBytes, "\(callback.body.utf8.count) bytes")
            let body = JSONValue.parse(callback.body)
            #expect(body?["id"] != nil, "the body is whole JSON")
            if body?["state"]?.stringValue == "failed" {
                #expect(body?["error"]?["code"]?.stringValue == "fetch.not_image")
                #expect(body?["error"]?["sources"] == nil)
            } else {
                #expect(body?["result"]?["key"]?.stringValue == control + "@" + identifier, "the key is whole")
                #expect(body?["result"]?["quality"] == .number(82) && body?["result"]?["score"] == .number(87.31))
                #expect(body?["result"]?["quality_exact"] == .number(82.5), "the quality with its half")
                #expect(body?["result"]?["target_missed"] == .bool(true) && body?["result"]?["chroma"] == .string("4:2:0"))
            }
        }
    }
}
