import Foundation
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// Webhook delivery against the world: a receiver's `Retry-After`, a key rotation verified by
/// Standard Webhooks' reference library, `halcyon deliver` with no worker, and a host's circuit
/// breaker — real `halcyon` processes, the real PostgreSQL, the test origin as receiver.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct WebhookDeliveryTests {
    let helper = WorkerTests()

    /// The deliveries the origin received for `key`.
    func deliveries(_ key: String) throws -> [JSONValue] {
        guard case .array(let all)? = JSONValue.parse(try Origin.get("\(TestEnvironment.origin)/_webhooks/\(key)")) else { return [] }
        return all
    }

    /// A 503 with `Retry-After: 3` is retried after about 3 s, not the 1 s backoff. Then, with
    /// the delivery made due again and no worker running, `halcyon deliver --drain` signed with
    /// two secrets (a rotation) delivers it, exits 0, and the reference library verifies the
    /// delivery with either secret alone.
    @Test func retryAfterIsHonouredAndDeliverSignsWithEverySecret() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("retry-after-store")
        let (png, _) = try WorkerTests.published()
        let newSecret = "new-\(db.name)", oldSecret = "whsec_" + Data("old-key-\(db.name)".utf8).base64EncodedString()
        let first = "\(db.name)-a", second = "\(db.name)-b"
        let id = try #require(
            try await db.query(
                "SELECT halcyon.enqueue($1, processors => 'format(png)', options => jsonb_build_object('callback_url', $2::text)) AS id",
                [
                    "\(TestEnvironment.origin)/files/\(png)?retry-after=\(db.name)",
                    "\(TestEnvironment.origin)/webhook/\(first)/1?secret=\(newSecret)&status=503&retry_after=3",
                ]
            ).value(0, "id").flatMap { Int64($0) })
        let worker = try await helper.worker(
            db, store: store, ["--drain", "--no-progress", "--webhook-secret", newSecret, "--poll-interval", "200ms"])
        #expect(await worker.wait(timeout: 90) == 0, "\(worker.output.suffix(2000))")
        let tries = try deliveries(first)
        #expect(tries.map { $0["status"]?.numberValue } == [503, 200], "\(tries)")
        if tries.count == 2, let a = tries[0]["at"]?.numberValue, let b = tries[1]["at"]?.numberValue {
            #expect(b - a >= 2.9, "the retry came \(b - a) s after the 503 asking for 3 s")
        }

        // Due again, pointed at a receiver that accepts at once; no worker runs.
        try await db.query(
            """
            UPDATE halcyon.jobs SET callback_status = 'pending', callback_attempts = 0, callback_at = now(),
                options = jsonb_set(options, '{callback_url}', to_jsonb($2::text))
            WHERE id = $1::bigint
            """, [String(id), "\(TestEnvironment.origin)/webhook/\(second)/0?secret=\(newSecret)"])
        let deliver = try HalcyonProcess(
            [
                "deliver", "--drain", "--grace", "2s", "--webhook-secret", newSecret, "--webhook-secret", oldSecret, "--allow-network",
                "127.0.0.1/32", "--poll-interval", "200ms",
            ], conninfo: db.conninfo)
        #expect(await deliver.wait(timeout: 60) == 0, "\(deliver.output.suffix(2000))")
        let row = try await db.query("SELECT state::text, callback_status, callback_attempts FROM halcyon.jobs WHERE id = $1::bigint", [String(id)])
        #expect(row.value(0, "state") == "succeeded")
        #expect(row.value(0, "callback_status") == "delivered")
        #expect(row.value(0, "callback_attempts") == "1")
        let delivered = try deliveries(second)
        #expect(delivered.count == 1 && delivered.first?["signature_ok"]?.boolValue == true, "\(delivered)")
        let delivery = try #require(delivered.first)
        let signature = try #require(delivery["webhook_signature"]?.stringValue)
        #expect(signature.split(separator: " ").count == 2, "one v1 signature per secret: \(signature)")
        for secret in [newSecret, oldSecret] {
            let verdict = try await ApplicationWorkerTests.standardWebhooksVerify(
                secret: secret, body: delivery["body"]?.stringValue ?? "", id: delivery["webhook_id"]?.stringValue ?? "",
                timestamp: delivery["webhook_timestamp"]?.stringValue ?? "", signature: signature)
            #expect(verdict == "ok", "secret \(secret): \(verdict)")
        }
        let stranger = try await ApplicationWorkerTests.standardWebhooksVerify(
            secret: "another-secret", body: delivery["body"]?.stringValue ?? "", id: delivery["webhook_id"]?.stringValue ?? "",
            timestamp: delivery["webhook_timestamp"]?.stringValue ?? "", signature: signature)
        #expect(stranger != "ok")
    }

    /// A receiver that answers 500 to everything: after 5 failed attempts in a row its circuit
    /// opens and the worker stops sending it anything for 30 s — the other deliveries wait with
    /// their attempts unspent, instead of ten deliveries each retrying every few seconds.
    @Test func aFailingHostsCircuitOpensAndItsDeliveriesWaitUnspent() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("breaker-store")
        let (png, _) = try WorkerTests.published()
        let secret = "secret-\(db.name)"
        let receiver = "\(TestEnvironment.origin)/webhook/\(db.name)/1000?secret=\(secret)"
        for i in 0..<10 {
            try await db.query(
                "SELECT halcyon.enqueue($1, processors => 'format(png)', options => jsonb_build_object('callback_url', $2::text))",
                ["\(TestEnvironment.origin)/files/\(png)?breaker=\(db.name)&n=\(i)", receiver])
        }
        let worker = try await helper.worker(db, store: store, ["--webhook-secret", secret, "--poll-interval", "200ms"])
        let finished = try await waitUntil(60) {
            try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE state = 'succeeded'").value(0, "n") == "10"
        }
        #expect(finished, "\(worker.output.suffix(2000))")
        // Ten seconds of deliveries: without a breaker, ten deliveries retried after 1, 2 and 4 s
        // make about 30 attempts.
        try await Task.sleep(for: .seconds(10))
        let attempts = try deliveries(db.name)
        print("circuit breaker: \(attempts.count) attempts from 10 deliveries reached a receiver answering 500 in 10 s")
        #expect(attempts.count >= 5 && attempts.count <= 7, "\(attempts.count) attempts reached the failing receiver")
        #expect(attempts.allSatisfy { $0["status"]?.numberValue == 500 })
        #expect(worker.output.contains("circuit open"), "\(worker.output.suffix(2000))")
        let spent = try await db.query(
            "SELECT sum(callback_attempts) AS n, count(*) FILTER (WHERE callback_status = 'pending') AS pending FROM halcyon.jobs")
        #expect(spent.value(0, "n") == String(attempts.count), "attempts on the rows = attempts the receiver saw")
        #expect(spent.value(0, "pending") == "10")
        let state = try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE state = 'succeeded'")
        #expect(state.value(0, "n") == "10", "a failing receiver never changes a job")
    }
}
