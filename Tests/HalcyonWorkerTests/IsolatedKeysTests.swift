import Foundation
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// Cache keys scoped to a queue (`halcyon.queues.isolated_keys`), end to end: real workers, the
/// real PostgreSQL and store, two parties that pick the same `cache_key`.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct IsolatedKeysTests {
    let helper = WorkerTests()

    func enqueue(_ db: TestDatabase, _ source: String, queue: String, options: String = "{}") async throws -> Int64 {
        try #require(
            try await db.query(
                "SELECT halcyon.enqueue($1, processors => 'format(png)', cache_key => 'avatar-1', queue => $2, options => $3::jsonb) AS id",
                [source, queue, options]
            ).value(0, "id").flatMap { Int64($0) })
    }

    func drain(_ db: TestDatabase, store: URL) async throws {
        let worker = try await helper.worker(db, store: store, ["--drain", "--no-progress"])
        #expect(await worker.wait(timeout: 90) == 0, "\(worker.output.suffix(2000))")
    }

    /// `halcyon show ID --json`'s `result_expires`.
    func shownExpiry(_ db: TestDatabase, _ id: Int64, store: URL) async throws -> String? {
        let show = try HalcyonProcess(["show", String(id), "--json", "--store", store.path], conninfo: db.conninfo)
        #expect(await show.wait(timeout: 60) == 0, "\(show.output)")
        guard case .object(let shown)? = JSONValue.parse(show.output) else { return nil }
        return shown["result_expires"]?.stringValue
    }

    func result(_ db: TestDatabase, _ id: Int64) async throws -> (digest: String?, hit: String?, key: String?) {
        let row = try await db.query("SELECT result_digest, cache_hit::text AS hit, result_key FROM halcyon.jobs WHERE id = $1::bigint", [String(id)])
        return (row.value(0, "result_digest"), row.value(0, "hit"), row.value(0, "result_key"))
    }

    /// Party A's queue isolates its keys. Party B enqueues the same `cache_key` with another
    /// image and `force_refresh` (on today's main that repoints A's result). A's next job is
    /// still served A's image; B's own queue sees B's.
    @Test func anotherQueueCannotRepointAnIsolatedQueuesResult() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("isolated-store")
        let (png, jpg) = try WorkerTests.published()
        try await db.query("INSERT INTO halcyon.queues (name, isolated_keys) VALUES ('tenant_a', true)")
        let a = "\(TestEnvironment.origin)/files/\(png)?isolated=\(db.name)"
        let b = "\(TestEnvironment.origin)/files/\(jpg)?isolated=\(db.name)"

        let first = try await enqueue(db, a, queue: "tenant_a")
        try await drain(db, store: store)
        let original = try await result(db, first)
        #expect(original.hit == "false" && original.digest != nil)
        #expect(original.key?.hasPrefix("avatar-1@format(png") == true, "result_key is cache_key@identifier in an isolated queue too")

        // `show` reads the key the worker stored: the queue's own (7 days from now), not the shared one.
        let firstExpiry = try #require(try await shownExpiry(db, first, store: store))
        let inAWeek = Date().addingTimeInterval(7 * 86_400)
        #expect(ISO8601.parse(firstExpiry).map { abs($0.timeIntervalSince(inAWeek)) < 600 } == true, "result_expires \(firstExpiry)")

        let intruder = try await enqueue(db, b, queue: "tenant_b", options: #"{"force_refresh": true, "expiration": "1d"}"#)
        try await drain(db, store: store)
        let replaced = try await result(db, intruder)
        #expect(replaced.hit == "false" && replaced.digest != nil && replaced.digest != original.digest)
        // The shared key now expires in a day; tenant_a's result still in a week.
        #expect(try await shownExpiry(db, first, store: store) == firstExpiry, "tenant_a's job shows its own key's expiry")
        let intruderExpiry = try #require(try await shownExpiry(db, intruder, store: store))
        #expect(ISO8601.parse(intruderExpiry).map { abs($0.timeIntervalSince(Date().addingTimeInterval(86_400))) < 600 } == true)

        let again = try await enqueue(db, a, queue: "tenant_a")
        let shared = try await enqueue(db, a, queue: "tenant_b")
        try await drain(db, store: store)
        let mine = try await result(db, again)
        #expect(mine.hit == "true", "served from the store")
        #expect(mine.digest == original.digest, "tenant_a still gets its own image, not tenant_b's")
        let theirs = try await result(db, shared)
        #expect(theirs.hit == "true" && theirs.digest == replaced.digest, "the shared key space is shared as before")
    }
}
