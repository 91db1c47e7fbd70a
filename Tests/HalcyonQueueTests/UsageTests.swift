import Foundation
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// Usage per queue and fair key (migrations/0016_usage.sql, 0019_usage_shares.sql, 0020_usage_totals.sql, usage.sql) on a
/// real database: which updates append an event, the bytes it bills, and the roll-up (alone, and two at once). The workers' side, against
/// the jobs' own timings, is `UsageWorkerTests`.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct UsageTests {
    func events(_ db: TestDatabase) async throws -> Int {
        Int(try await db.query("SELECT count(*) FROM halcyon.usage_events").rows[0][0] ?? "") ?? -1
    }

    func timings(cpu: Double) -> StageTimings {
        var t = StageTimings()
        t.decodeCPU = cpu
        t.processCPU = cpu * 2
        t.encodeCPU = cpu * 3
        t.storeCPU = cpu * 4
        return t
    }

    @Test func claimsHeartbeatsAndReleasesAppendNothingAndEachEndedAttemptOneEvent() async throws {
        let db = try await TestDatabase.create()
        let q = JobQueue(connection: try await db.connect())
        _ = try await q.enqueue(
            batch: (0..<5).map { i in
                var j = JobQueue.NewJob(source: "https://e.com/\(i).jpg")
                j.fairKey = i < 3 ? "t1" : nil
                return j
            })
        let jobs = try await q.claim(workerID: "w", limit: 5, lease: .seconds(30), siblings: false)
        try #require(jobs.count == 5)
        _ = try await q.heartbeat(jobs.map(\.claim), workerID: "w", lease: .seconds(30))
        _ = try await q.heartbeat(jobs.map(\.claim), workerID: "w", lease: .seconds(30))
        #expect(try await q.release([jobs[4].claim], workerID: "w") == 1)
        #expect(try await events(db) == 0, "a claim, a heartbeat or a release appended an event")

        let result = JobResult(key: "k", digest: "d", path: "p", bytes: 1000, width: 1, height: 1, format: "jpeg", cacheHit: false, source: "s")
        #expect(try await q.complete(jobs[0].claim, workerID: "w", result: result, timings: timings(cpu: 0.001)))
        var hit = result
        hit.cacheHit = true
        #expect(try await q.complete(jobs[1].claim, workerID: "w", result: hit, timings: timings(cpu: 0.0001)))
        _ = try await q.fail(
            jobs[2].claim, workerID: "w", error: HalcyonError(.timeout, "slow", permanent: false), retryDelay: .seconds(60),
            timings: timings(cpu: 0.002))
        _ = try await q.cancel(ids: [jobs[3].id])
        #expect(try await events(db) == 4)

        // A rescue (the lease ran out): a retry, without CPU (it writes no timings).
        let again = try await q.claim(workerID: "w", limit: 5, lease: .seconds(30), siblings: false)
        try #require(again.count == 1)
        try await db.query("UPDATE halcyon.jobs SET locked_until = now() - interval '1 s' WHERE id = $1", [String(again[0].id)])
        #expect(try await q.rescueExpired().count == 1)
        #expect(try await events(db) == 5)

        let since = JobQueue.usageHour(Date().addingTimeInterval(-3600))
        let rows = try await q.usage(UsageRequest(since: since, byFairKey: true)).rows
        let t1 = try #require(rows.first { $0.fairKey == "t1" }), common = try #require(rows.first { $0.fairKey == "" })
        #expect(t1.succeeded == 2 && t1.retried == 1 && t1.failed == 0 && t1.storeHits == 1 && t1.bytesStored == 1000)
        #expect(common.cancelled == 1 && common.succeeded == 0 && common.retried == 1, "\(common)")
        #expect(common.cpuMs == 0, "a cancel and a rescue write no timings: no CPU")
        // 1 + 0.1 + 2 ms of decode, and the other stages in proportion.
        #expect(abs(t1.decodeCPUms - 3.1) < 0.01 && abs(t1.storeCPUms - 12.4) < 0.01, "\(t1)")
    }

    /// The bytes an event bills are the job's share from its timings (`fetched_bytes`), whatever
    /// the outcome — a failure after its download too — while the row's `source_bytes` stays the
    /// source's size. Timings without a share (a worker of an earlier version) bill a success's
    /// source bytes, as before; a store hit bills none.
    @Test func theBytesBilledAreTheJobsShareWhateverItsOutcome() async throws {
        let db = try await TestDatabase.create()
        let q = JobQueue(connection: try await db.connect())
        _ = try await q.enqueue(batch: (0..<4).map { i in JobQueue.NewJob(source: "https://e.com/shared.jpg?\(i)") })
        let jobs = try await q.claim(workerID: "w", limit: 4, lease: .seconds(30), siblings: false)
        try #require(jobs.count == 4)
        let facts = SourceRecord(width: 4000, height: 3000, format: "jpeg", bytes: 12_017_532, metaJSON: "{}")
        let result = JobResult(
            key: "k", digest: "d", path: "p", bytes: 1000, width: 1, height: 1, format: "jpeg", cacheHit: false, source: "s", facts: facts)
        func share(_ bytes: Int?) -> StageTimings {
            var t = timings(cpu: 0.001)
            t.fetchedBytes = bytes
            return t
        }
        #expect(try await q.complete(jobs[0].claim, workerID: "w", result: result, timings: share(4_005_845)))
        _ = try await q.fail(
            jobs[1].claim, workerID: "w", error: HalcyonError(.tooCostly, "slow", permanent: true), retryDelay: .zero, timings: share(4_005_844))
        #expect(try await q.complete(jobs[2].claim, workerID: "w", result: result, timings: share(nil)))
        var hit = result
        hit.cacheHit = true
        #expect(try await q.complete(jobs[3].claim, workerID: "w", result: hit, timings: share(nil)))
        let billed = try await db.query("SELECT bytes_fetched, failed FROM halcyon.usage_events ORDER BY bytes_fetched").rows
        #expect(billed.map { $0[0] ?? "" } == ["0", "4005844", "4005845", "12017532"], "\(billed)")
        #expect(billed[1][1] == "1", "the failure's share: \(billed)")
        let sources = try await db.query("SELECT DISTINCT source_bytes FROM halcyon.jobs WHERE state = 'succeeded'").rows
        #expect(sources.map { $0[0] ?? "" } == ["12017532"], "source_bytes is the source's size: \(sources)")
    }

    /// 30,000 events over two queues, three keys and three hours: rolled up by two connections at
    /// once in batches of 4,000, every event counted once, and every report the same before and after.
    @Test func theRollUpMovesEventsOnceAndChangesNoTotal() async throws {
        let db = try await TestDatabase.create()
        let a = JobQueue(connection: try await db.connect()), b = JobQueue(connection: try await db.connect())
        try await db.query(
            """
            INSERT INTO halcyon.usage_events (at, queue, fair_key, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms,
                                              encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits)
            SELECT now() - (i % 3) * interval '1 hour', CASE WHEN i % 2 = 0 THEN 'default' ELSE 'thumbs' END,
                   (ARRAY['t1', 't2', NULL])[i % 3 + 1], (i % 5 <> 0)::int, (i % 5 = 0)::int, 0, (i % 7 = 0)::int,
                   0.5, 1.25, 2, 0.1, 1000 + i, 500, (i % 11 = 0)::int
            FROM generate_series(1, 30000) AS i
            """)
        let since = JobQueue.usageHour(Date().addingTimeInterval(-4 * 3600))
        try await Self.awayFromTheHour()
        let day = JobQueue.usageHour(Date().addingTimeInterval(-86_400))
        _ = try await a.keepUsageWindows(retain: .days(400))
        func reports() async throws -> [[Usage]] {
            let totals = try await a.usage(UsageRequest(since: day, byFairKey: true, sort: .cpu))
            #expect(totals.fromTotals)
            return [
                try await a.usage(UsageRequest(since: since)).rows, try await a.usage(UsageRequest(since: since, byFairKey: true)).rows,
                try await a.usage(UsageRequest(since: since, byFairKey: true, hourly: true)).rows,
                try await a.usage(UsageRequest(since: since, queue: "thumbs")).rows, totals.rows,
            ]
        }
        let before = try await reports()
        let total = try await a.usage(UsageRequest(since: since)).total
        #expect(total.succeeded + total.failed == 30000 && total.bytesFetched == 30000 * 1000 + 30000 * 30001 / 2)

        let started = ContinuousClock.now
        async let first = rollUpAll(a)
        async let second = rollUpAll(b)
        let (movedA, movedB) = try await (first, second)
        let took = ContinuousClock.now - started
        #expect(movedA + movedB == 30000, "moved \(movedA) + \(movedB)")
        #expect(try await a.usage(UsageRequest(since: day, byFairKey: true), totals: false).total.succeeded == total.succeeded)
        #expect(try await events(db) == 0)
        let after = try await reports()
        for (x, y) in zip(before, after) { #expect(rounded(x) == rounded(y)) }
        print("usage roll-up: 30000 events by two connections in batches of 4000: \(took)")

        // Events arriving after a roll-up add to the hours already there.
        try await db.query(
            """
            INSERT INTO halcyon.usage_events (queue, fair_key, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms,
                                              encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits)
            VALUES ('default', 't1', 1, 0, 0, 0, 1, 1, 1, 1, 10, 10, 0)
            """)
        #expect(try await a.rollUpUsage() == JobQueue.UsageRollUp(events: 1, hours: 1))
        #expect(try await a.usage(UsageRequest(since: since)).total.succeeded == total.succeeded + 1)
        // Retention: hours older than it go, newer stay.
        try await db.query("UPDATE halcyon.usage SET hour = hour - interval '30 days' WHERE queue = 'thumbs'")
        #expect(try await a.pruneUsage(olderThan: .days(10)) > 0)
        #expect(try await a.usage(UsageRequest(since: since.addingTimeInterval(-40 * 86400), queue: "thumbs")).rows.isEmpty)
        #expect(!(try await a.usage(UsageRequest(since: since, queue: "default"))).rows.isEmpty)
    }

    func rollUpAll(_ q: JobQueue) async throws -> Int {
        var moved = 0
        while true {
            let r = try await q.rollUpUsage(limit: 4000)
            moved += r.events
            if r.events == 0 { return moved }
        }
    }

    /// Doubles summed in another order differ in their last bits.
    func rounded(_ rows: [Usage]) -> [Usage] {
        rows.map { u in
            var u = u
            for path in [\Usage.decodeCPUms, \.processCPUms, \.encodeCPUms, \.storeCPUms] {
                u[keyPath: path] = (u[keyPath: path] * 1000).rounded() / 1000
            }
            return u
        }
    }

    /// How long one statement takes to roll up a full batch (50,000 events): printed, not asserted.
    @Test func aFullBatchRollsUpInOneStatement() async throws {
        let db = try await TestDatabase.create()
        let q = JobQueue(connection: try await db.connect())
        try await db.query(
            """
            INSERT INTO halcyon.usage_events (at, queue, fair_key, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms,
                                              encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits)
            SELECT now() - (i % 24) * interval '1 hour', 'default', 'tenant-' || ((i / 24) % 100), 1, 0, 0, 0, 1, 1, 1, 1, 100, 100, 0
            FROM generate_series(1, 60000) AS i
            """)
        let started = ContinuousClock.now
        let r = try await q.rollUpUsage()
        let took = ContinuousClock.now - started
        #expect(r.events == JobQueue.usageRollUpBatch && r.hours == 2400)
        #expect(try await q.rollUpUsage().events == 10000)
        print("usage roll-up: \(r.events) events into \(r.hours) hours in one statement: \(took)")
    }

    /// Every page in every order, of every key and of one queue, from the windows' running totals
    /// and summed from the hours, over 24 hours and 7 days: the same rows and totals, whether the
    /// events are pending, half or all rolled up, after the windows move on two hours, and after
    /// a retention shorter than 7 days clears that window. Returns how many came from the totals.
    func totalsAgreeWithTheHours(_ q: JobQueue, since: Date, _ note: String) async throws -> Int {
        var fromTotals = 0
        for sort in UsageRequest.Sort.allCases {
            for queue in [nil, "thumbs"] as [String?] {
                for (limit, offset) in [(25, 13), (1000, 0), (5, 590)] {
                    let request = UsageRequest(since: since, byFairKey: true, queue: queue, sort: sort, limit: limit, offset: offset)
                    let fast = try await q.usage(request), slow = try await q.usage(request, totals: false)
                    #expect(rounded(fast.rows) == rounded(slow.rows), "\(note): \(request)")
                    #expect(rounded([fast.total]) == rounded([slow.total]), "\(note): \(request)")
                    #expect(fast.totalRows == slow.totalRows && !slow.fromTotals, "\(note): \(request)")
                    if fast.fromTotals { fromTotals += 1 }
                }
            }
        }
        return fromTotals
    }

    /// Waits out the last two minutes of an hour: a window's hour and a report's must be the
    /// same hour for the report to read the window.
    static func awayFromTheHour() async throws {
        let left = 3600 - Date().timeIntervalSince1970.truncatingRemainder(dividingBy: 3600)
        if left < 120 { try await Task.sleep(for: .seconds(left + 1)) }
    }

    @Test func theWindowsTotalsAnswerWhatTheHoursDo() async throws {
        try await Self.awayFromTheHour()
        let db = try await TestDatabase.create()
        let q = JobQueue(connection: try await db.connect())
        let pages = UsageRequest.Sort.allCases.count * 2 * 3
        // 600 keys of two queues (every 50th the common share), five hours each over the last 9
        // days; CPU in halves and quarters, so that sums in any order are exact; many ties.
        try await db.query(
            """
            INSERT INTO halcyon.usage (queue, fair_key, hour, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms,
                                       encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits)
            SELECT CASE WHEN k % 3 = 0 THEN 'thumbs' ELSE 'default' END, CASE WHEN k % 50 = 0 THEN '' ELSE 'tenant-' || k END,
                   date_trunc('hour', now()) - ((k * 7 + h * 13) % 216) * interval '1 hour', (k + h) % 4, h % 2, (k % 5 = 0)::int,
                   h % 3, (k % 9) * 0.5, 0.25, h % 3, 0, (k % 10) * 100, k % 7, h % 2
            FROM generate_series(1, 600) k, generate_series(0, 4) h
            ON CONFLICT DO NOTHING
            """)
        func events(_ tag: String) async throws {
            // Keys the windows have and new ones, the common share, now and 3 and 10 days ago.
            try await db.query(
                """
                INSERT INTO halcyon.usage_events (at, queue, fair_key, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms,
                                                  encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits)
                SELECT now() - (ARRAY[0, 0, 3, 10])[i % 4 + 1] * interval '1 day', CASE WHEN i % 2 = 0 THEN 'thumbs' ELSE 'default' END,
                       CASE WHEN i % 5 = 0 THEN '\(tag)-' || (i % 40) WHEN i % 7 = 0 THEN NULL ELSE 'tenant-' || (i * 37 % 600) END,
                       1, (i % 6 = 0)::int, 0, 0, i % 4 * 0.5, 8, 0.25, 0.25, 1000 * (i % 5), 10, 0
                FROM generate_series(1, 400) AS i
                """)
        }
        let day = JobQueue.usageHour(Date().addingTimeInterval(-86_400)), week = JobQueue.usageHour(Date().addingTimeInterval(-7 * 86_400))
        #expect(try await totalsAgreeWithTheHours(q, since: day, "not built") == 0)

        let built = try await q.keepUsageWindows(retain: .days(400))
        #expect(built.steps.map(\.action) == [.build, .build] && built.steps.allSatisfy { $0.totals > 100 }, "\(built)")
        #expect(try await q.keepUsageWindows(retain: .days(400)).changed == false)
        try await events("new")
        for since in [day, week] { #expect(try await totalsAgreeWithTheHours(q, since: since, "events pending") == pages) }
        _ = try await q.rollUpUsage(limit: 150)
        for since in [day, week] { #expect(try await totalsAgreeWithTheHours(q, since: since, "a third rolled up") == pages) }
        _ = try await rollUpAll(q)
        try await events("newer")
        for since in [day, week] { #expect(try await totalsAgreeWithTheHours(q, since: since, "rolled up, more pending") == pages) }

        // Two hours pass: everything is two hours older, the windows too. Until they move on,
        // the hours answer; then the totals again, with the hours that left subtracted.
        for shift in [
            // (by way of a century ago: hours moved one at a time must not meet those not moved yet)
            "UPDATE halcyon.usage SET hour = hour - interval '100 years'",
            "UPDATE halcyon.usage SET hour = hour + interval '100 years' - interval '2 hours'",
            "UPDATE halcyon.usage_events SET at = at - interval '2 hours'",
            "UPDATE halcyon.usage_windows SET since = since - interval '2 hours'",
        ] { try await db.query(shift) }
        #expect(try await totalsAgreeWithTheHours(q, since: day, "windows behind") == 0)
        let slid = try await q.keepUsageWindows(retain: .days(400))
        #expect(slid.steps.map(\.action) == [.slide, .slide] && slid.steps.allSatisfy { $0.hours > 0 }, "\(slid)")
        _ = try await rollUpAll(q)
        for since in [day, week] { #expect(try await totalsAgreeWithTheHours(q, since: since, "moved on") == pages) }

        // Hours written by something that knows nothing of the windows (a worker of an earlier
        // version rolling up, an edit by hand): when the windows next move on, they are found
        // not to agree with their hours and built again.
        try await db.query(
            """
            INSERT INTO halcyon.usage AS u (queue, fair_key, hour, succeeded, bytes_fetched)
            VALUES ('default', 'tenant-1', date_trunc('hour', now()), 3, 999), ('thumbs', 'by-hand', date_trunc('hour', now()), 1, 5)
            ON CONFLICT (queue, fair_key, hour) DO UPDATE SET succeeded = u.succeeded + 3, bytes_fetched = u.bytes_fetched + 999
            """)
        for shift in [
            "UPDATE halcyon.usage SET hour = hour - interval '100 years'",
            "UPDATE halcyon.usage SET hour = hour + interval '100 years' - interval '1 hour'",
            "UPDATE halcyon.usage_events SET at = at - interval '1 hour'",
            "UPDATE halcyon.usage_windows SET since = since - interval '1 hour'",
        ] { try await db.query(shift) }
        let rebuilt = try await q.keepUsageWindows(retain: .days(400))
        #expect(rebuilt.steps.map(\.action) == [.rebuild, .rebuild], "\(rebuilt)")
        for since in [day, week] { #expect(try await totalsAgreeWithTheHours(q, since: since, "built again") == pages) }

        // A retention shorter than 7 days clears that window; the prune never deletes an hour
        // the 24-hour window counts, even asked to keep one hour only.
        let cleared = try await q.keepUsageWindows(retain: .days(2))
        #expect(cleared.steps.map(\.action) == [.none, .clear], "\(cleared)")
        #expect(try await totalsAgreeWithTheHours(q, since: week, "7d cleared") == 0)
        #expect(try await q.pruneUsage(olderThan: .hours(1), limit: 100_000) > 0)
        #expect(try await totalsAgreeWithTheHours(q, since: day, "pruned") == pages)

        // An event written by hand with a negative measure: the hours answer the reports that
        // include its queue.
        try await db.query(
            """
            INSERT INTO halcyon.usage_events (queue, fair_key, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms,
                                              encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits)
            VALUES ('default', 'tenant-1', 1, 0, 0, 0, -5, 0, 0, 0, 0, 0, 0)
            """)
        #expect(try await totalsAgreeWithTheHours(q, since: day, "a negative event") == pages / 2)
    }
}
