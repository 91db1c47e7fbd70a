import Foundation
import HalcyonCore
import HalcyonQueue
import HalcyonStore
import HalcyonTestSupport
import Testing

/// The application's side of issue #16 end to end: real `halcyon work` and CLI processes, the
/// real PostgreSQL, the test origin as image source and webhook receiver.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"))
struct ApplicationWorkerTests {
    let helper = WorkerTests()

    func value(_ db: TestDatabase, _ sql: String, _ id: Int64) async throws -> String? {
        try await db.query(sql, [String(id)]).value(0, "v")
    }

    func run(_ db: TestDatabase, _ arguments: [String], timeout: Double = 60) async throws -> (status: Int32?, output: String) {
        let p = try HalcyonProcess(arguments, conninfo: db.conninfo)
        return (await p.wait(timeout: timeout), p.output)
    }

    /// The receiver answers 500 twice, then 200: exactly one accepted, correctly signed delivery.
    /// A callback to a private address fails with `fetch.blocked_address` on the row, and the
    /// job stays succeeded.
    @Test func webhooksAreSignedRetriedAndRecordedWithoutTouchingTheJob() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("webhook-store")
        let (png, _) = try WorkerTests.published()
        let secret = "secret-\(db.name)"
        let receiver = "\(TestEnvironment.origin)/webhook/\(db.name)/2?secret=\(secret)"
        let good = try await db.query(
            "SELECT halcyon.enqueue($1, processors => 'format(png)', options => jsonb_build_object('callback_url', $2::text), tags => '{upload:7}') AS id",
            ["\(TestEnvironment.origin)/files/\(png)?webhook=\(db.name)", receiver]
        ).value(0, "id").flatMap { Int64($0) }!
        let blocked = try await db.query(
            "SELECT halcyon.enqueue($1, processors => 'format(png)', options => '{\"callback_url\": \"http://10.0.0.1/hook\"}') AS id",
            ["\(TestEnvironment.origin)/files/\(png)?webhook=\(db.name)"]
        ).value(0, "id").flatMap { Int64($0) }!
        let worker = try helper.worker(db, store: store, ["--webhook-secret", secret, "--poll-interval", "200ms"])
        defer { worker.signal(SIGKILL) }
        let settled = try await waitUntil(60) {
            try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE callback_status IN ('delivered', 'failed')").value(0, "n") == "2"
        }
        #expect(settled, "\(worker.output)")
        guard case .array(let deliveries)? = JSONValue.parse(try Origin.get("\(TestEnvironment.origin)/_webhooks/\(db.name)")) else {
            Issue.record("no deliveries")
            return
        }
        #expect(deliveries.map { $0["status"]?.numberValue } == [500, 500, 200])
        #expect(deliveries.allSatisfy { $0["signature_ok"]?.boolValue == true })
        #expect(deliveries.map { $0["attempt_header"]?.stringValue } == ["1", "2", "3"])
        let body = deliveries.last?["body"]?.stringValue.flatMap(JSONValue.parse)
        #expect(body?["id"]?.numberValue == Double(good))
        #expect(body?["state"]?.stringValue == "succeeded")
        #expect(body?["tags"]?.arrayValue?.first?.stringValue == "upload:7")
        #expect(body?["result"]?["path"]?.stringValue?.isEmpty == false)
        let row = try await db.query(
            "SELECT state::text, callback_status, callback_attempts, callback_error FROM halcyon.jobs WHERE id = $1::bigint", [String(good)])
        #expect(row.value(0, "state") == "succeeded")
        #expect(row.value(0, "callback_status") == "delivered")
        #expect(row.value(0, "callback_attempts") == "3")
        #expect(row.value(0, "callback_error") == nil)
        let refused = try await db.query(
            "SELECT state::text, callback_status, callback_attempts, callback_error FROM halcyon.jobs WHERE id = $1::bigint", [String(blocked)])
        #expect(refused.value(0, "state") == "succeeded")
        #expect(refused.value(0, "callback_status") == "failed")
        #expect(refused.value(0, "callback_attempts") == "1")
        #expect(refused.value(0, "callback_error")?.hasPrefix("fetch.blocked_address") == true, "\(refused.dictionaries)")
    }

    /// Deliveries live on the rows: one that came due while no worker ran, and one a worker
    /// took and never finished (its hold ran out), are both made by the next worker.
    @Test func aDeliveryThatWasDueIsNotLostWithItsWorker() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("webhook-store")
        let receiver = "\(TestEnvironment.origin)/webhook/\(db.name)/0?secret=s"
        let ids = try await db.query(
            """
            SELECT halcyon.enqueue('https://example.com/' || g || '.jpg', options => jsonb_build_object('callback_url', $1::text)) AS id
            FROM generate_series(1, 2) AS g
            """, [receiver]
        ).rows.compactMap { $0[0].flatMap { Int64($0) } }
        // Both finish with no worker running (an operator cancels them)…
        try await db.query("UPDATE halcyon.jobs SET state = 'cancelled', finished_at = now()")
        // …and the second delivery was taken by a worker that died: its hold ran out.
        try await db.query(
            "UPDATE halcyon.jobs SET callback_attempts = 1, callback_at = now() - interval '1 second' WHERE id = $1::bigint", [String(ids[1])])
        let worker = try helper.worker(db, store: store, ["--webhook-secret", "s", "--poll-interval", "200ms"])
        defer { worker.signal(SIGKILL) }
        let delivered = try await waitUntil(60) {
            try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE callback_status = 'delivered'").value(0, "n") == "2"
        }
        #expect(delivered, "\(worker.output)")
        #expect(try await value(db, "SELECT callback_attempts::text AS v FROM halcyon.jobs WHERE id = $1::bigint", ids[1]) == "2")
        guard case .array(let deliveries)? = JSONValue.parse(try Origin.get("\(TestEnvironment.origin)/_webhooks/\(db.name)")) else {
            Issue.record("no deliveries")
            return
        }
        #expect(deliveries.count == 2)
        #expect(Set(deliveries.compactMap { $0["body"]?.stringValue.flatMap(JSONValue.parse)?["state"]?.stringValue }) == ["cancelled"])
    }

    /// `enqueue --wait` and `wait` exit 0 / 1 / 2; `enqueue --file` reports duplicates by line;
    /// a paused queue is left alone by workers and shown by `status`; `pause` of an unknown
    /// queue is a clear error; bulk `retry` prints its count.
    @Test func theCommandLineWaitsPausesAndReportsDuplicates() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("cli-store")
        let (png, _) = try WorkerTests.published()
        let source = "\(TestEnvironment.origin)/files/\(png)?cli=\(db.name)"
        let worker = try helper.worker(db, store: store, ["--poll-interval", "200ms"])
        defer { worker.signal(SIGKILL) }

        let ok = try await run(db, ["enqueue", source, "--processors", "format(png)", "--wait", "--timeout", "60s"])
        #expect(ok.status == 0, "\(ok.output)")
        #expect(ok.output.contains("succeeded"), "\(ok.output)")

        let failing = try await run(
            db, ["enqueue", "\(TestEnvironment.origin)/status/404?cli=\(db.name)", "--max-attempts", "1", "--wait", "--json"])
        #expect(failing.status == 1, "\(failing.output)")
        #expect(failing.output.contains("fetch.http_status"), "\(failing.output)")

        let paused = try await run(db, ["pause", "later"])
        #expect(paused.status != 0 && paused.output.contains("no queue named 'later'"), "\(paused.output)")
        // Scheduled for later, so its queue can be paused first (a queue exists once a job was
        // enqueued to it); then made runnable: a paused queue's job stays queued.
        let queued = try await run(
            db, ["enqueue", source, "--queue", "later", "--tag", "batch:1", "--run-at", ISO8601.format(Date().addingTimeInterval(3600))])
        let laterID = try #require(queued.output.split(separator: "\n").first.flatMap { Int64($0) }, "\(queued.output)")
        #expect(try await run(db, ["pause", "later"]).status == 0)
        try await db.query("UPDATE halcyon.jobs SET run_at = now() WHERE id = $1::bigint", [String(laterID)])
        let timedOut = try await run(db, ["wait", String(laterID), "--timeout", "2s"])
        #expect(timedOut.status == 2, "\(timedOut.output)")
        #expect(timedOut.output.contains("unfinished"), "\(timedOut.output)")
        #expect(try await value(db, "SELECT state::text AS v FROM halcyon.jobs WHERE id = $1::bigint", laterID) == "queued")
        let status = try await run(db, ["status", "--tag", "batch:1"])
        #expect(status.output.contains("PAUSED"), "\(status.output)")
        #expect(status.output.contains("TAG batch:1"), "\(status.output)")
        let shown = try await run(db, ["show", String(laterID)])
        #expect(shown.output.contains("queue") && shown.output.contains("later") && shown.output.contains("batch:1"), "\(shown.output)")
        #expect(try await run(db, ["resume", "later"]).status == 0)
        #expect(try await run(db, ["wait", String(laterID), "--timeout", "60s"]).status == 0)

        let file = try TestEnvironment.temporaryDirectory("lines").appendingPathComponent("jobs.jsonl")
        try """
        {"source": "https://example.com/1.jpg", "unique_key": "u-1", "queue": "held", "tags": ["a"]}
        {"source": "https://example.com/2.jpg", "unique_key": "u-1", "queue": "held"}
        {"source": "https://example.com/3.jpg", "queue": "held"}
        """.write(to: file, atomically: true, encoding: .utf8)
        let lines = try await run(db, ["enqueue", "--file", file.path])
        #expect(lines.status == 0, "\(lines.output)")
        #expect(lines.output.contains("line 2: duplicate: unique_key 'u-1' is held by job"), "\(lines.output)")
        #expect(!lines.output.contains("line 3: duplicate"), "\(lines.output)")

        let retried = try await run(db, ["retry", "--code", "fetch.http_status", "--since", "1h", "--dry-run"])
        #expect(retried.output.contains("would be requeued (dry run): 1 jobs"), "\(retried.output)")
    }

    /// `work --queue a=1 --drain` takes only queue a's jobs; retention prunes old finished rows
    /// (and keeps recent ones), records it, and `status` shows it.
    @Test func aWorkerTakesOnlyItsQueuesAndPrunesOldRows() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("queue-store")
        let (png, _) = try WorkerTests.published()
        for (i, queue) in ["thumbs", "thumbs", "backfill"].enumerated() {
            try await db.query(
                "SELECT halcyon.enqueue($1, processors => 'format(png)', queue => $2)",
                ["\(TestEnvironment.origin)/files/\(png)?q=\(db.name)-\(i)", queue])
        }
        try await db.query(
            """
            INSERT INTO halcyon.jobs (source, state, finished_at)
            SELECT 'https://example.com/old.jpg', s::halcyon.job_state, now() - age
            FROM (VALUES ('succeeded', interval '2 hours'), ('succeeded', interval '10 minutes'), ('failed', interval '3 hours'),
                         ('cancelled', interval '30 minutes')) AS v(s, age)
            """)
        let worker = try helper.worker(
            db, store: store, ["--queue", "thumbs=1", "--drain", "--sweep-interval", "1s", "--retain-succeeded", "1h", "--retain-failed", "1h"])
        #expect(await worker.wait(timeout: 60) == 0, "\(worker.output)")
        let states = try await db.query(
            "SELECT queue, state::text, count(*) AS n FROM halcyon.jobs WHERE source LIKE '%q=%' GROUP BY 1, 2 ORDER BY 1")
        #expect(states.rows == [["backfill", "queued", "1"], ["thumbs", "succeeded", "2"]], "\(states.rows)")
        // The drain may end before the first sweep: run one more worker that sweeps and stays.
        if try await db.query("SELECT count(*) AS n FROM halcyon.row_prunes").value(0, "n") == "0" {
            let sweeper = try helper.worker(
                db, store: store, ["--queue", "none", "--sweep-interval", "1s", "--retain-succeeded", "1h", "--retain-failed", "1h"])
            defer { sweeper.signal(SIGKILL) }
            #expect(try await waitUntil(30) { try await db.query("SELECT count(*) AS n FROM halcyon.row_prunes").value(0, "n") != "0" })
        }
        let old = try await db.query("SELECT state::text, count(*) AS n FROM halcyon.jobs WHERE source LIKE '%old.jpg' GROUP BY 1 ORDER BY 1")
        #expect(old.rows == [["cancelled", "1"], ["succeeded", "1"]], "\(old.rows)")
        let totals = try await db.query("SELECT sum(succeeded)::text AS s, sum(failed)::text AS f, sum(cancelled)::text AS c FROM halcyon.row_prunes")
        #expect(totals.rows == [["1", "1", "0"]])
        let status = try await run(db, ["status"])
        #expect(status.output.contains("RETENTION"), "\(status.output)")
    }
}
