import Foundation
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// Fair keys (claims go round-robin between the keys of a queue) and a queue's fleet-wide limits
/// (`max_running`, `max_per_second`, `max_running_per_key`), through `JobQueue.claim` on a real
/// database. The workers' side is `FleetTests`.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct FairShareTests {
    func enqueue(_ q: JobQueue, _ n: Int, key: String?, queue: String = QueueName.default, priority: Int = 0) async throws -> [Int64] {
        try await q.enqueue(
            batch: (0..<n).map { i in
                var j = JobQueue.NewJob(source: "https://e.com/\(key ?? "-")/\(i).jpg")
                j.fairKey = key
                j.queue = queue
                j.priority = priority
                return j
            }
        ).map(\.id)
    }

    /// Claims one job at a time until none is left; the fair key of each, in claim order.
    func claimOneByOne(_ q: JobQueue, max: Int) async throws -> [String?] {
        var order: [String?] = []
        while order.count < max, let job = try await q.claim(workerID: "w", limit: 1, lease: .seconds(30), siblings: false).first {
            order.append(job.fairKey)
        }
        return order
    }

    @Test func keysAreServedRoundRobinAndTheCommonShareIsOneOfThem() async throws {
        let db = try await TestDatabase.create()
        let q = JobQueue(connection: try await db.connect())
        _ = try await enqueue(q, 100, key: "big")
        _ = try await enqueue(q, 3, key: "small")
        _ = try await enqueue(q, 2, key: nil)
        let order = try await claimOneByOne(q, max: 20)
        // Three shares, served in turn: "small" and the common share are done within three rounds.
        let lastSmall = order.lastIndex(of: "small") ?? 99, lastCommon = order.lastIndex(of: nil) ?? 99
        #expect(lastSmall < 9 && lastCommon < 9, "\(order)")
        #expect(order.filter { $0 == "small" }.count == 3 && order.filter { $0 == nil }.count == 2)
        // The job row and `show` have the key.
        let id = try #require(try await enqueue(q, 1, key: "tenant-7").first)
        let row = try #require(try await q.job(id: id))
        #expect(row.fairKey == "tenant-7" && row.json["fair_key"] == .string("tenant-7"))
    }

    /// One tenant's backlog of 1,500; another's 30 jobs, enqueued after 100 were claimed, are all
    /// claimed within the next 62 (one round of two keys each, and the claims in flight).
    @Test func aKeyArrivingBehindABacklogWaitsAboutOneRound() async throws {
        let db = try await TestDatabase.create()
        let q = JobQueue(connection: try await db.connect())
        _ = try await enqueue(q, 1500, key: "backfill")
        var claimed = 0
        while claimed < 100 { claimed += try await q.claim(workerID: "w", limit: 4, lease: .seconds(30)).count }
        let late = Set(try await enqueue(q, 30, key: "upload"))
        var after: [Int64] = []
        while !late.isSubset(of: after) {
            let batch = try await q.claim(workerID: "w", limit: 4, lease: .seconds(30)).map(\.id)
            try #require(!batch.isEmpty)
            after += batch
        }
        #expect(after.count <= 64, "the 30 late jobs took \(after.count) claims")
    }

    @Test func priorityStillComesFirstAndScheduledJobsWait() async throws {
        let db = try await TestDatabase.create()
        let q = JobQueue(connection: try await db.connect())
        _ = try await enqueue(q, 5, key: "a")
        let urgent = try await enqueue(q, 2, key: "b", priority: 5)
        try await db.query("SELECT halcyon.enqueue('https://e.com/later', fair_key => 'c', run_at => now() + interval '1 hour')")
        let first = try await q.claim(workerID: "w", limit: 2, lease: .seconds(30), siblings: false).map(\.id)
        #expect(Set(first) == Set(urgent))
        let rest = try await claimOneByOne(q, max: 10)
        #expect(rest == Array(repeating: "a", count: 5))
    }

    @Test func fairKeysAreBoundedAndEveryEnqueueFunctionTakesThem() async throws {
        let db = try await TestDatabase.create()
        for sql in [
            "SELECT halcyon.enqueue('https://e.com/a.jpg', fair_key => '')",
            "SELECT halcyon.enqueue('https://e.com/a.jpg', fair_key => repeat('k', 201))",
            "INSERT INTO halcyon.jobs (source, fair_key) VALUES ('https://e.com/a.jpg', repeat('é', 101))",
        ] {
            await #expect(Comment(rawValue: sql)) {
                try await db.query(sql)
            } throws: { error in
                (error as? DatabaseError)?.sqlState == "23514"
            }
        }
        try await db.query("SELECT halcyon.enqueue('https://e.com/a.jpg', fair_key => repeat('k', 200))")
        // Positional calls of the earlier versions still resolve.
        try await db.query("SELECT halcyon.enqueue('https://e.com/b.jpg', '', NULL, '{}', '{}', 0, 5, now(), 'default', NULL, '{}')")
        try await db.query("SELECT halcyon.enqueue('https://e.com/b.jpg')")
        try await db.query("INSERT INTO halcyon.presets (name, processors) VALUES ('thumb', 'resize(10x10)'), ('card', 'resize(20x20)')")
        let ids = try await db.query(
            "SELECT unnest(halcyon.enqueue_variants('https://e.com/c.jpg', ARRAY['thumb', 'card'], fair_key => 'tenant')) AS id")
        #expect(ids.rows.count == 2)
        let keys = try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE fair_key = 'tenant'")
        #expect(keys.value(0, "n") == "2")
        #expect(FairKey.problem("") != nil && FairKey.problem(String(repeating: "é", count: 101)) != nil && FairKey.problem("t") == nil)
    }

    @Test func idleKeysLeaveTheRotationAndComeBackWithTheirNextJob() async throws {
        let db = try await TestDatabase.create()
        let q = JobQueue(connection: try await db.connect())
        _ = try await enqueue(q, 2, key: "a")
        _ = try await enqueue(q, 1, key: "b")
        _ = try await claimOneByOne(q, max: 10)
        #expect(try await q.forgetIdleFairKeys() == 2)
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.fair_turns").value(0, "n") == "0")
        // A retry puts the key back.
        try await db.query("UPDATE halcyon.jobs SET state = 'failed', locked_by = NULL, locked_until = NULL WHERE fair_key = 'b'")
        try await db.query("UPDATE halcyon.jobs SET state = 'queued' WHERE fair_key = 'b'")
        let keys = try await db.query("SELECT fair_key FROM halcyon.fair_turns ORDER BY fair_key").rows.map { $0[0] ?? "?" }
        #expect(keys == ["", "b"])
    }

    /// 3,000 keys with a job each scheduled a day ahead stand before two tenants in the rotation
    /// (their turns are older): they are parked at 1,000 a claim at most, and from then on never
    /// cost a turn — tenant b's 50 jobs are claimed one for one with a's backlog.
    @Test func keysWithNothingRunnableNeverCostATurn() async throws {
        let db = try await TestDatabase.create()
        let q = JobQueue(connection: try await db.connect())
        try await db.query(
            """
            INSERT INTO halcyon.jobs (source, fair_key, run_at)
            SELECT 'https://e.com/idle/' || g, 'idle-' || g, now() + interval '1 day' FROM generate_series(1, 3000) g
            """)
        _ = try await enqueue(q, 300, key: "a")
        _ = try await enqueue(q, 50, key: "b")
        // The idle keys first in turn order, as after a day of rotation.
        try await db.query("UPDATE halcyon.fair_turns SET turn = nextval('halcyon.fair_turn_seq') WHERE fair_key LIKE 'idle-%'")
        try await db.query("UPDATE halcyon.fair_turns SET turn = nextval('halcyon.fair_turn_seq') WHERE fair_key IN ('a', 'b')")
        var order: [String?] = []
        while order.count < 150 {
            let batch = try await q.claim(workerID: "w", limit: 3, lease: .seconds(30), siblings: false)
            if batch.isEmpty { break }
            order += batch.map(\.fairKey)
        }
        let lastB = order.lastIndex(of: "b") ?? 999
        #expect(order.filter { $0 == "b" }.count == 50 && lastB < 120, "b's last claim was at \(lastB): \(order.map { $0 ?? "-" })")
        let parked = try await db.query("SELECT count(*) AS n FROM halcyon.fair_turns WHERE parked_until IS NOT NULL AND fair_key LIKE 'idle-%'")
        #expect(parked.value(0, "n") == "3000")
        // A parked key's own job brings it back at once; the others stay parked.
        _ = try await enqueue(q, 1, key: "idle-7")
        let next = try await q.claim(workerID: "w", limit: 3, lease: .seconds(30), siblings: false).map(\.fairKey)
        #expect(next.contains("idle-7"), "\(next)")
    }

    /// Claims of three between two keys: neither ever gets more than two ahead of the other (a
    /// batch that ends within a round is continued by the next claim, not restarted).
    @Test func claimsAlternateOneForOneAcrossBatches() async throws {
        let db = try await TestDatabase.create()
        let q = JobQueue(connection: try await db.connect())
        _ = try await enqueue(q, 100, key: "a")
        _ = try await enqueue(q, 100, key: "b")
        var a = 0, b = 0, widest = 0
        for _ in 0..<20 {
            for job in try await q.claim(workerID: "w", limit: 3, lease: .seconds(30), siblings: false) {
                if job.fairKey == "a" { a += 1 } else { b += 1 }
            }
            widest = max(widest, abs(a - b))
        }
        #expect(a + b == 60 && widest <= 1, "a \(a), b \(b), at most \(widest) apart")
    }

    // MARK: Fleet-wide limits

    @Test func maxRunningHoldsAcrossConcurrentClaimers() async throws {
        let db = try await TestDatabase.create()
        let q = JobQueue(connection: try await db.connect())
        _ = try await enqueue(q, 40, key: nil, queue: "origin")
        _ = try await enqueue(q, 10, key: nil)
        try await q.setLimits(queue: "origin", QueueLimits(maxRunning: 2))
        let result = JobResult(key: "k", digest: "d", path: "p", bytes: 1, width: 1, height: 1, format: "png", cacheHit: false, source: nil)
        let counts = try await withThrowingTaskGroup(of: (claimed: Int, highest: Int).self) { group in
            for w in 0..<4 {
                group.addTask {
                    let mine = JobQueue(connection: try await db.connect())
                    var claimed = 0, highest = 0, idle = 0
                    while idle < 200 {
                        let jobs = try await mine.claim(workerID: "w\(w)", limit: 3, lease: .seconds(30)).filter { $0.queue == "origin" }
                        let running = try await mine.connection.execute(
                            "SELECT count(*) AS n FROM halcyon.jobs WHERE queue = 'origin' AND state = 'running'")
                        highest = max(highest, Int(running.value(0, "n") ?? "") ?? 0)
                        claimed += jobs.count
                        for job in jobs { _ = try await mine.complete(job.claim, workerID: "w\(w)", result: result) }
                        idle = jobs.isEmpty ? idle + 1 : 0
                        if try await mine.connection.execute(
                            "SELECT count(*) AS n FROM halcyon.jobs WHERE queue = 'origin' AND state = 'queued'"
                        ).value(0, "n") == "0" {
                            break
                        }
                    }
                    return (claimed, highest)
                }
            }
            return try await group.reduce(into: [(claimed: Int, highest: Int)]()) { $0.append($1) }
        }
        #expect(counts.reduce(0) { $0 + $1.claimed } == 40)
        #expect(counts.allSatisfy { $0.highest <= 2 }, "\(counts)")
        // The unlimited queue was claimed as before.
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE queue = 'default' AND state = 'running'").value(0, "n") == "10")
    }

    @Test func maxRunningPerKeyLeavesRoomForOtherKeys() async throws {
        let db = try await TestDatabase.create()
        let q = JobQueue(connection: try await db.connect())
        _ = try await enqueue(q, 10, key: "greedy")
        _ = try await enqueue(q, 3, key: "modest")
        _ = try await enqueue(q, 3, key: nil)
        try await db.query("UPDATE halcyon.queues SET max_running_per_key = 2 WHERE name = 'default'")
        let first = try await q.claim(workerID: "w", limit: 10, lease: .seconds(30))
        let byKey = Dictionary(grouping: first, by: { $0.fairKey ?? "" }).mapValues(\.count)
        #expect(byKey == ["greedy": 2, "modest": 2, "": 2], "\(byKey)")
        #expect(try await q.claim(workerID: "w", limit: 10, lease: .seconds(30)).isEmpty)
        // A finished job frees its key's slot only.
        let greedy = try #require(first.first { $0.fairKey == "greedy" })
        let result = JobResult(key: "k", digest: "d", path: "p", bytes: 1, width: 1, height: 1, format: "png", cacheHit: false, source: nil)
        #expect(try await q.complete(greedy.claim, workerID: "w", result: result))
        #expect(try await q.claim(workerID: "w", limit: 10, lease: .seconds(30)).map(\.fairKey) == ["greedy"])
    }

    /// A rate of 20 a second, claimed as fast as a loop can for about a second and a half: at
    /// most the bucket (20) plus the refill; at least the bucket.
    @Test func maxPerSecondRoughlyHolds() async throws {
        let db = try await TestDatabase.create()
        let q = JobQueue(connection: try await db.connect())
        _ = try await enqueue(q, 200, key: nil, queue: "rated")
        try await db.query("SELECT halcyon.set_queue_limits('rated', max_per_second => 20)")
        let start = ContinuousClock.now
        var claimed = 0
        while ContinuousClock.now - start < .milliseconds(1500) {
            claimed += try await q.claim(workerID: "w", limit: 50, lease: .seconds(30)).count
            try await Task.sleep(for: .milliseconds(20))
        }
        let seconds = (ContinuousClock.now - start).seconds
        #expect(claimed >= 20 && Double(claimed) <= 20 + 20 * seconds + 1, "\(claimed) in \(seconds) s")
    }

    @Test(arguments: [
        "SELECT halcyon.set_queue_limits('q', max_running => 0)",
        "SELECT halcyon.set_queue_limits('q', max_running => -1)",
        "SELECT halcyon.set_queue_limits('q', max_running => 1000001)",
        "SELECT halcyon.set_queue_limits('q', max_per_second => 0)",
        "SELECT halcyon.set_queue_limits('q', max_per_second => -5)",
        "SELECT halcyon.set_queue_limits('q', max_per_second => 'NaN')",
        "SELECT halcyon.set_queue_limits('q', max_per_second => 'Infinity')",
        "SELECT halcyon.set_queue_limits('q', max_running_per_key => 0)",
        "SELECT halcyon.set_queue_limits('bad name', max_running => 1)",
        "UPDATE halcyon.queues SET max_running = 0",
        "UPDATE halcyon.queues SET max_per_second = 'NaN'",
        "UPDATE halcyon.queues SET max_running_per_key = -3",
        "UPDATE halcyon.queues SET tokens_at = '-infinity'",
        "UPDATE halcyon.queues SET tokens_at = 'infinity'",
        "UPDATE halcyon.queues SET tokens = -3e9",
        "UPDATE halcyon.queues SET tokens = 'NaN'",
        "UPDATE halcyon.queues SET paused_at = '-infinity'",
        "SELECT halcyon.enqueue('https://e.com/a.jpg', run_at => '-infinity')",
        "SELECT halcyon.enqueue('https://e.com/a.jpg', run_at => 'infinity')",
        "SELECT halcyon.enqueue('https://e.com/a.jpg', max_attempts => 1000001)",
    ])
    func badLimitsAreRefused(sql: String) async throws {
        let db = try await TestDatabase.create()
        await #expect {
            try await db.query(sql)
        } throws: { error in
            let state = (error as? DatabaseError)?.sqlState
            return state == "22023" || state == "23514"
        }
        let limits = try await db.query(
            "SELECT count(*) AS n FROM halcyon.queues WHERE max_running IS NOT NULL OR max_per_second IS NOT NULL OR tokens IS NOT NULL")
        #expect(limits.value(0, "n") == "0")
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.jobs").value(0, "n") == "0")
    }

    /// A rate-limited queue whose bucket holds what the constraints refuse (written before them,
    /// or by a restore that skipped them): read as a full bucket, written back good by the next
    /// claim, and the other queues claimed all along. And when the limited claim fails however
    /// it fails, the other queues are still claimed and the refusal is reported once.
    @Test func oneQueuesBadStateCannotStopTheOthers() async throws {
        let db = try await TestDatabase.create()
        let q = JobQueue(connection: try await db.connect())
        let limited = try await enqueue(q, 3, key: nil, queue: "rated")
        try await db.query("SELECT halcyon.set_queue_limits('rated', max_per_second => 2)")
        try await db.query("ALTER TABLE halcyon.queues DROP CONSTRAINT queues_tokens_range, DROP CONSTRAINT queues_times_finite")
        for bad in [
            "tokens_at = '-infinity', tokens = 0", "tokens = -3e9, tokens_at = now()", "tokens = 'NaN', tokens_at = now()",
            "tokens = 0, tokens_at = now() + interval '10 years'",
        ] {
            try await db.query("UPDATE halcyon.queues SET \(bad) WHERE name = 'rated'")
            let bystander = try #require(try await enqueue(q, 1, key: nil).first)
            let claimed = try await q.claim(workerID: "w", limit: 10, lease: .seconds(30), siblings: false).map(\.id)
            #expect(claimed.contains(bystander), "\(bad)")
            // A full bucket of two claims, and a good one written back.
            #expect(claimed.filter(limited.contains).count == 1 || claimed.filter(limited.contains).count == 2, "\(bad): \(claimed)")
            let bucket = try await db.query("SELECT tokens BETWEEN 0 AND 2 AND isfinite(tokens_at) AS good FROM halcyon.queues WHERE name = 'rated'")
            #expect(bucket.value(0, "good") == "t", "\(bad)")
            try await db.query("UPDATE halcyon.jobs SET state = 'queued', locked_by = NULL, locked_until = NULL WHERE queue = 'rated'")
        }
        #expect(q.limitedClaimFailure() == nil)
        // The limited claim itself refused (its function replaced by one that fails).
        try await db.query(
            """
            CREATE OR REPLACE FUNCTION halcyon.queue_tokens(rate float8, tokens float8, since timestamptz) RETURNS float8
            LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'broken bucket' USING ERRCODE = 'data_exception'; END $$
            """)
        let bystander = try #require(try await enqueue(q, 1, key: nil).first)
        let claimed = try await q.claim(workerID: "w", limit: 10, lease: .seconds(30), siblings: false).map(\.id)
        #expect(claimed == [bystander])
        let refused = try #require(q.limitedClaimFailure())
        #expect(refused.count == 1 && refused.error.message.contains("broken bucket"))
        #expect(q.limitedClaimFailure() == nil, "reported at most once a minute")
    }

    @Test func limitsAreCheckedBeforeTheyReachTheDatabase() async throws {
        #expect(throws: QueueLimitsError.self) { try QueueLimits(maxRunning: 0).validate() }
        #expect(throws: QueueLimitsError.self) { try QueueLimits(maxPerSecond: .nan).validate() }
        #expect(throws: QueueLimitsError.self) { try QueueLimits(maxPerSecond: .infinity).validate() }
        #expect(throws: QueueLimitsError.self) { try QueueLimits(maxRunningPerKey: 2_000_000).validate() }
        try QueueLimits(maxRunning: 2, maxPerSecond: 0.5, maxRunningPerKey: 1).validate()
        let db = try await TestDatabase.create()
        let q = JobQueue(connection: try await db.connect())
        // A queue no job has used yet gets its limits; status shows them.
        try await q.setLimits(queue: "later", QueueLimits(maxRunning: 3, maxPerSecond: 2.5))
        let status = try await QueueStatus.load(q.connection)
        let later = try #require(status.queues.first { $0.name == "later" })
        #expect(later.limits == QueueLimits(maxRunning: 3, maxPerSecond: 2.5))
        #expect(status.json["queues"]?.arrayValue?.contains { $0["name"] == .string("later") && $0["max_running"] == .number(3) } == true)
        try await q.setLimits(queue: "later", QueueLimits())
        #expect(try await QueueStatus.load(q.connection).queues.first { $0.name == "later" }?.limits.isEmpty == true)
    }
}
