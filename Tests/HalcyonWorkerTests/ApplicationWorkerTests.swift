import Foundation
import HalcyonEmbedded
import HalcyonQueue
import HalcyonRuntime
import HalcyonStore
import HalcyonTestSupport
import Testing

/// The application's side end to end: workers (in this process, and a `halcyon work` process
/// where one must die), CLI processes, the real PostgreSQL, the test origin as image source and
/// webhook receiver.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct ApplicationWorkerTests {
    let helper = WorkerTests()

    func value(_ db: TestDatabase, _ sql: String, _ id: Int64) async throws -> String? {
        try await db.query(sql, [String(id)]).value(0, "v")
    }

    func run(_ db: TestDatabase, _ arguments: [String], timeout: Double = 60) async throws -> (status: Int32?, output: String) {
        let p = try HalcyonProcess(arguments, conninfo: db.conninfo)
        return (await p.wait(timeout: timeout), p.output)
    }

    static let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

    /// The receiver answers 500 twice, then 200: exactly one accepted, correctly signed delivery,
    /// each attempt with the job's trace context. A callback to a private address fails with
    /// `fetch.blocked_address` on the row, and the job stays succeeded.
    @Test func webhooksAreSignedRetriedAndRecordedWithoutTouchingTheJob() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("webhook-store")
        let (png, _) = try WorkerTests.published()
        let secret = "secret-\(db.name)"
        let receiver = "\(TestEnvironment.origin)/webhook/\(db.name)/2?secret=\(secret)"
        let good = try await db.query(
            """
            SELECT halcyon.enqueue($1, processors => 'format(png)', options => jsonb_build_object('callback_url', $2::text), tags => '{upload:7}',
                                   traceparent => $3, tracestate => 'rojo=1') AS id
            """,
            ["\(TestEnvironment.origin)/files/\(png)?webhook=\(db.name)", receiver, Self.traceparent]
        ).value(0, "id").flatMap { Int64($0) }!
        let blocked = try await db.query(
            "SELECT halcyon.enqueue($1, processors => 'format(png)', options => '{\"callback_url\": \"http://10.0.0.1/hook\"}') AS id",
            ["\(TestEnvironment.origin)/files/\(png)?webhook=\(db.name)"]
        ).value(0, "id").flatMap { Int64($0) }!
        let worker = try await helper.worker(db, store: store, ["--webhook-secret", secret, "--poll-interval", "200ms"])
        let settled = try await waitUntil(60) {
            try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE callback_status IN ('delivered', 'failed')").value(0, "n") == "2"
        }
        #expect(settled, "\(worker.output)")
        // The two retried attempts are logged (info) with the job's trace id.
        let retries = worker.output.split(separator: "\n").filter { $0.contains("webhook delivery failed; will retry") && $0.contains("job=\(good)") }
        #expect(retries.count == 2 && retries.allSatisfy { $0.contains("trace_id=0af7651916cd43dd8448eb211c80319c") }, "\(worker.output)")
        guard case .array(let deliveries)? = JSONValue.parse(try Origin.get("\(TestEnvironment.origin)/_webhooks/\(db.name)")) else {
            Issue.record("no deliveries")
            return
        }
        #expect(deliveries.map { $0["status"]?.numberValue } == [500, 500, 200])
        #expect(deliveries.allSatisfy { $0["signature_ok"]?.boolValue == true })
        #expect(deliveries.map { $0["attempt_header"]?.stringValue } == ["1", "2", "3"])
        // Every attempt carries the job's trace context, as the enqueuer gave it.
        #expect(deliveries.allSatisfy { $0["traceparent"]?.stringValue == Self.traceparent && $0["tracestate"]?.stringValue == "rojo=1" })
        // Standard Webhooks: one message id for the three attempts, a timestamp per attempt, and a
        // signature the reference library accepts; one changed byte of the body or a timestamp
        // older than its 5 minutes and it refuses.
        let messageIDs = Set(deliveries.compactMap { $0["webhook_id"]?.stringValue })
        #expect(messageIDs.count == 1 && messageIDs.first?.hasPrefix("job_\(good)_") == true, "\(messageIDs)")
        for delivery in deliveries {
            let body = try #require(delivery["body"]?.stringValue), id = try #require(delivery["webhook_id"]?.stringValue)
            let timestamp = try #require(delivery["webhook_timestamp"]?.stringValue)
            let signature = try #require(delivery["webhook_signature"]?.stringValue)
            #expect(try await Self.standardWebhooksVerify(secret: secret, body: body, id: id, timestamp: timestamp, signature: signature) == "ok")
            #expect(
                try await Self.standardWebhooksVerify(secret: secret, body: body + " ", id: id, timestamp: timestamp, signature: signature) != "ok")
            let old = String((Int(timestamp) ?? 0) - 600)
            #expect(try await Self.standardWebhooksVerify(secret: secret, body: body, id: id, timestamp: old, signature: signature) != "ok")
        }
        let body = deliveries.last?["body"]?.stringValue.flatMap(JSONValue.parse)
        #expect(body?["id"]?.numberValue == Double(good))
        #expect(body?["state"]?.stringValue == "succeeded")
        #expect(body?["tags"]?.arrayValue?.first?.stringValue == "upload:7")
        #expect(body?["trace_id"]?.stringValue == "0af7651916cd43dd8448eb211c80319c")
        #expect(body?["result"]?["path"]?.stringValue?.isEmpty == false)
        #expect(body?["result"]?["quality"] == .null && body?["result"]?["score"] == .null, "a png has no quality; no score was asked for")
        #expect(body?["result"]?["target_missed"] == .null, "no target")
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

    /// A receiver that never answers (a tarpit) takes at most two delivery slots per worker:
    /// six deliveries due to it first, then two to a normal receiver on another host — the two
    /// are delivered while the tarpit still holds its requests, and the tarpit has seen two.
    @Test func aSlowReceiverHoldsOnlyItsOwnDeliveries() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("tarpit-store")
        let (png, _) = try WorkerTests.published()
        let tarpitDir = try TestEnvironment.temporaryDirectory("tarpit")
        let tarpit = try await Self.startReceiver(in: tarpitDir, host: "127.0.0.2")
        defer { kill(tarpit.pid, SIGKILL) }
        let secret = "secret-\(db.name)"
        let good = "\(TestEnvironment.origin)/webhook/\(db.name)/0?secret=\(secret)"
        for i in 0..<8 {
            try await db.query(
                "SELECT halcyon.enqueue($1, processors => 'format(png)', options => jsonb_build_object('callback_url', $2::text))",
                ["\(TestEnvironment.origin)/files/\(png)?tarpit=\(db.name)&n=\(i)", i < 6 ? tarpit.url : good])
        }
        // A first worker finishes the jobs (it may not reach 127.0.0.2: the tarpit's deliveries fail
        // at once). Then every delivery is made due again, the tarpit's six first, for a second
        // worker that may reach both.
        let first = try await helper.worker(db, store: store, ["--drain", "--no-progress", "--webhook-timeout", "10m"])
        #expect(await first.wait(timeout: 120) != nil)
        try await db.query(
            "UPDATE halcyon.jobs SET callback_status = 'pending', callback_attempts = 0, callback_at = now() - interval '1 minute' + (id * interval '1 ms')"
        )
        let worker = try await helper.worker(
            db, store: store, ["--allow-network", "127.0.0.2/32", "--webhook-secret", secret, "--webhook-timeout", "10m", "--poll-interval", "200ms"])
        let delivered = try await waitUntil(120) {
            try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE callback_status = 'delivered'").value(0, "n") == "2"
        }
        #expect(delivered, "the normal receiver's deliveries waited behind the tarpit: \(worker.output.suffix(2000))")
        // The tarpit's two requests may still be arriving on a loaded machine; a third never comes.
        #expect(try await waitUntil(30) { tarpit.requests().count >= 2 }, "\(tarpit.requests())")
        #expect(tarpit.requests().count == 2, "\(tarpit.requests())")
        let pending = try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE callback_status = 'pending' AND callback_attempts <= 1")
        #expect(pending.value(0, "n") == "6", "the put-back deliveries spent no attempt")
    }

    /// What Standard Webhooks' reference Python library (`standardwebhooks`, in scripts/test's
    /// venv) says of a delivery: "ok", or its error. A `whsec_` secret is passed as it is (the
    /// library decodes it), any other as its bytes.
    static func standardWebhooksVerify(secret: String, body: String, id: String, timestamp: String, signature: String) async throws -> String {
        let python = try #require(ProcessInfo.processInfo.environment["HALCYON_TEST_PYTHON"], "scripts/test sets HALCYON_TEST_PYTHON")
        let dir = try TestEnvironment.temporaryDirectory("standard-webhooks")
        let input = dir.appendingPathComponent("in.json"), output = dir.appendingPathComponent("out.txt")
        try JSONValue.object([
            "secret": .string(secret), "body": .string(body), "id": .string(id), "timestamp": .string(timestamp), "signature": .string(signature),
        ]).jsonText.write(to: input, atomically: true, encoding: .utf8)
        let script = """
            import json, sys
            from standardwebhooks.webhooks import Webhook
            d = json.load(open(sys.argv[1]))
            try:
                s = d["secret"]
                Webhook(s if s.startswith("whsec_") else s.encode()).verify(d["body"], {"webhook-id": d["id"], "webhook-timestamp": d["timestamp"], "webhook-signature": d["signature"]})
                print("ok")
            except Exception as e:
                print("refused: %s" % e)
            """
        // Off the cooperative pool: a Python start-up is a blocking wait of a few hundred ms.
        _ = try await Blocking.run { try Subprocess.run(python, ["-c", script, input.path], outputPath: output.path) }
        return try String(contentsOf: output, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `work --drain` delivers the webhooks of what it drained before it exits: a receiver that
    /// answers 500 once gets its retry (1 s later, within --grace), a refused address is recorded
    /// as `fetch.blocked_address` — nothing is left pending, nothing recorded as cancelled.
    @Test func aDrainingWorkerDeliversItsWebhooksBeforeItExits() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("drain-webhook-store")
        let (png, _) = try WorkerTests.published()
        // Standard Webhooks' own form of a secret: the key is the bytes it encodes.
        let secret = "whsec_" + Data("key of \(db.name)".utf8).base64EncodedString()
        let retried = try #require(
            try await db.query(
                "SELECT halcyon.enqueue($1, processors => 'format(png)', options => jsonb_build_object('callback_url', $2::text)) AS id",
                [
                    "\(TestEnvironment.origin)/files/\(png)?drain-webhook=\(db.name)",
                    "\(TestEnvironment.origin)/webhook/\(db.name)/1?secret=\(secret)",
                ]
            ).value(0, "id"))
        let blocked = try #require(
            try await db.query(
                "SELECT halcyon.enqueue($1, processors => 'format(png)', options => '{\"callback_url\": \"http://10.0.0.1/hook\"}') AS id",
                ["\(TestEnvironment.origin)/files/\(png)?drain-webhook=\(db.name)"]
            ).value(0, "id"))
        let worker = try await helper.worker(db, store: store, ["--drain", "--no-progress", "--webhook-secret", secret, "--poll-interval", "200ms"])
        #expect(await worker.wait(timeout: 120) == 0, "\(worker.output.suffix(3000))")
        let sql = "SELECT state::text, callback_status, callback_attempts, callback_error FROM halcyon.jobs WHERE id = $1::bigint"
        let r = try await db.query(sql, [retried])
        #expect(r.value(0, "state") == "succeeded" && r.value(0, "callback_status") == "delivered", "\(r.dictionaries)")
        #expect(r.value(0, "callback_attempts") == "2", "\(r.dictionaries)")
        let b = try await db.query(sql, [blocked])
        #expect(
            b.value(0, "callback_status") == "failed" && b.value(0, "callback_error")?.hasPrefix("fetch.blocked_address") == true, "\(b.dictionaries)"
        )
        #expect(!worker.output.contains("the worker stopped during the delivery"), "\(worker.output.suffix(3000))")
        guard case .array(let deliveries)? = JSONValue.parse(try Origin.get("\(TestEnvironment.origin)/_webhooks/\(db.name)")) else {
            Issue.record("no deliveries")
            return
        }
        #expect(deliveries.map { $0["status"]?.numberValue } == [500, 200])
        for delivery in deliveries {
            let verdict = try await Self.standardWebhooksVerify(
                secret: secret, body: delivery["body"]?.stringValue ?? "", id: delivery["webhook_id"]?.stringValue ?? "",
                timestamp: delivery["webhook_timestamp"]?.stringValue ?? "", signature: delivery["webhook_signature"]?.stringValue ?? "")
            #expect(verdict == "ok")
        }
    }

    /// A webhook receiver on 127.0.0.1 (a Python process of the test's own): it logs every POST
    /// (attempt header, job, whether it was answered) and answers 200 only once the file
    /// `answer` exists in `directory`; before that it holds each request open for an hour.
    static func startReceiver(
        in directory: URL, host: String = "127.0.0.1"
    ) async throws -> (
        pid: pid_t, url: String, requests: () -> [[String: String]]
    ) {
        let script = directory.appendingPathComponent("receiver.py")
        try """
        import http.server, json, os, sys, time
        d = sys.argv[1]
        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get('Content-Length', '0')))
                answer = os.path.exists(os.path.join(d, 'answer'))
                with open(os.path.join(d, 'requests'), 'a') as f:
                    f.write(json.dumps({'attempt': self.headers.get('X-Halcyon-Delivery-Attempt', ''),
                                        'job': self.headers.get('X-Halcyon-Job', ''),
                                        'answered': 'yes' if answer else 'no'}) + '\\n')
                if not answer:
                    time.sleep(3600)
                    return
                self.send_response(200)
                self.send_header('Content-Length', '2')
                self.end_headers()
                self.wfile.write(b'ok')
            def log_message(self, *args):
                pass
        server = http.server.ThreadingHTTPServer((sys.argv[2], 0), H)
        server.daemon_threads = True
        with open(os.path.join(d, 'port.part'), 'w') as f:
            f.write(str(server.server_address[1]))
        os.rename(os.path.join(d, 'port.part'), os.path.join(d, 'port'))
        server.serve_forever()
        """.write(to: script, atomically: true, encoding: .utf8)
        let pid = try Subprocess.spawn(
            "/usr/bin/env", ["python3", script.path, directory.path, host], outputPath: directory.appendingPathComponent("receiver.log").path)
        let portFile = directory.appendingPathComponent("port")
        _ = try await waitUntil(120) { FileManager.default.fileExists(atPath: portFile.path) }
        let port = try String(contentsOf: portFile, encoding: .utf8)
        let log = directory.appendingPathComponent("requests")
        return (
            pid, "http://\(host):\(port)/hook",
            {
                ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { line in
                    guard case .object(let o)? = JSONValue.parse(String(line)) else { return nil }
                    return o.compactMapValues { $0.stringValue }
                }
            }
        )
    }

    /// Deliveries live on the rows, so a worker's death loses none. A real `halcyon work` is
    /// SIGKILLed (with its image process) while its delivery is in flight — the receiver holds
    /// the POST open — and a second worker makes that delivery once its hold (the webhook
    /// timeout + 30 s) runs out. Two jobs cancelled (`halcyon cancel`) while no worker runs
    /// have their deliveries due with no worker; the second worker makes them too.
    @Test func aDeliveryIsNotLostWithItsWorker() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("webhook-store")
        let directory = try TestEnvironment.temporaryDirectory("receiver")
        let receiver = try await Self.startReceiver(in: directory)
        defer { kill(receiver.pid, SIGKILL); _ = Subprocess.status(of: receiver.pid, block: true) }
        let (png, _) = try WorkerTests.published()
        let killed = try #require(
            try await db.query(
                "SELECT halcyon.enqueue($1, processors => 'format(png)', options => jsonb_build_object('callback_url', $2::text)) AS id",
                ["\(TestEnvironment.origin)/files/\(png)?webhook-kill=\(db.name)", receiver.url]
            ).value(0, "id"))
        let arguments = ["--webhook-secret", "s", "--webhook-timeout", "10s", "--poll-interval", "200ms"]
        let first = try await helper.workerProcess(db, store: store, arguments)
        defer { first.signal(SIGKILL) }
        #expect(try await waitUntil(90) { receiver.requests().count == 1 }, "no delivery reached the receiver: \(first.output.suffix(1500))")
        first.signal(SIGKILL)
        #expect(await first.wait(timeout: 30) != 0, "the first worker was not killed")
        let held = try await db.query(
            "SELECT state::text, callback_status, callback_attempts, callback_error FROM halcyon.jobs WHERE id = $1::bigint", [killed])
        // Killed mid-delivery: taken (attempt 1), nothing recorded (the 10 s timeout never came).
        #expect(
            held.value(0, "state") == "succeeded" && held.value(0, "callback_status") == "pending" && held.value(0, "callback_attempts") == "1"
                && held.value(0, "callback_error") == nil, "\(held.dictionaries)")

        // Due with no worker running: two jobs an operator cancels.
        let cancelled = try await db.query(
            """
            SELECT halcyon.enqueue('https://example.com/' || g || '.jpg', options => jsonb_build_object('callback_url', $1::text)) AS id
            FROM generate_series(1, 2) AS g
            """, [receiver.url]
        ).rows.compactMap { $0[0] }
        let cancel = try await run(db, ["cancel"] + cancelled)
        #expect(cancel.status == 0, "\(cancel.output)")

        #expect(FileManager.default.createFile(atPath: directory.appendingPathComponent("answer").path, contents: Data()))
        let second = try await helper.worker(db, store: store, arguments)
        let delivered = try await waitUntil(120) {
            try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE callback_status = 'delivered'").value(0, "n") == "3"
        }
        #expect(delivered, "\(second.output.suffix(2000))")
        #expect(try await value(db, "SELECT callback_attempts::text AS v FROM halcyon.jobs WHERE id = $1::bigint", Int64(killed)!) == "2")
        let requests = receiver.requests()
        #expect(requests.filter { $0["job"] == killed }.map { [$0["attempt"] ?? "", $0["answered"] ?? ""] } == [["1", "no"], ["2", "yes"]])
        for id in cancelled {
            #expect(requests.filter { $0["job"] == id }.map { [$0["attempt"] ?? "", $0["answered"] ?? ""] } == [["1", "yes"]], "\(requests)")
        }
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE state = 'cancelled'").value(0, "n") == "2")
    }

    /// `enqueue --wait` and `wait` exit 0 / 1 / 2; `enqueue --file` reports duplicates by line;
    /// a paused queue is left alone by workers and shown by `status`; `pause` of an unknown
    /// queue is a clear error; bulk `retry` prints its count.
    @Test func theCommandLineWaitsPausesAndReportsDuplicates() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("cli-store")
        let (png, _) = try WorkerTests.published()
        let source = "\(TestEnvironment.origin)/files/\(png)?cli=\(db.name)"
        let worker = try await helper.worker(db, store: store, ["--poll-interval", "200ms"])
        defer { withExtendedLifetime(worker) {} }  // running to the end of the test

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
        let worker = try await helper.worker(
            db, store: store, ["--queue", "thumbs=1", "--drain", "--sweep-interval", "1s", "--retain-succeeded", "1h", "--retain-failed", "1h"])
        #expect(await worker.wait(timeout: 60) == 0, "\(worker.output)")
        let states = try await db.query(
            "SELECT queue, state::text, count(*) AS n FROM halcyon.jobs WHERE source LIKE '%q=%' GROUP BY 1, 2 ORDER BY 1")
        #expect(states.rows == [["backfill", "queued", "1"], ["thumbs", "succeeded", "2"]], "\(states.rows)")
        // The drain may end before the first sweep: run one more worker that sweeps and stays.
        if try await db.query("SELECT count(*) AS n FROM halcyon.row_prunes").value(0, "n") == "0" {
            let sweeper = try await helper.worker(
                db, store: store, ["--queue", "none", "--sweep-interval", "1s", "--retain-succeeded", "1h", "--retain-failed", "1h"])
            defer { withExtendedLifetime(sweeper) {} }
            #expect(try await waitUntil(120) { try await db.query("SELECT count(*) AS n FROM halcyon.row_prunes").value(0, "n") != "0" })
        }
        let old = try await db.query("SELECT state::text, count(*) AS n FROM halcyon.jobs WHERE source LIKE '%old.jpg' GROUP BY 1 ORDER BY 1")
        #expect(old.rows == [["cancelled", "1"], ["succeeded", "1"]], "\(old.rows)")
        let totals = try await db.query("SELECT sum(succeeded)::text AS s, sum(failed)::text AS f, sum(cancelled)::text AS c FROM halcyon.row_prunes")
        #expect(totals.rows == [["1", "1", "0"]])
        let status = try await run(db, ["status"])
        #expect(status.output.contains("RETENTION"), "\(status.output)")
    }
}
