import Foundation
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import HalcyonSamples
import HalcyonTestSupport
import Synchronization
import Testing

/// `halcyon usage` after a mixed run of real workers agrees with the jobs' own rows: jobs counted
/// exactly, CPU by stage as their timings say, bytes exact — before and after the roll-up. (The
/// roll-up itself and which updates append events: `UsageTests`.)
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct UsageWorkerTests {
    static let tiny: Data = try! SampleImages.photo(width: 32, height: 24, seed: 5)
    static let chain = "resize(16x16) |> format(png)"

    func usage(_ db: TestDatabase, _ arguments: [String]) async throws -> JSONValue {
        let p = try HalcyonProcess(["usage", "--json"] + arguments, conninfo: db.conninfo)
        #expect(await p.wait(timeout: 60) == 0, "\(p.output)")
        let text = p.output
        let json = text.firstIndex(of: "{").flatMap { JSONValue.parse(String(text[$0...])) }
        return try #require(json, "\(text)")
    }

    func drained(_ db: TestDatabase) async throws -> Bool {
        try await waitUntil(120) {
            try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE state IN ('queued', 'running')").value(0, "n") == "0"
        }
    }

    /// What the jobs' rows say of fair key `key` ('' for the common share).
    struct Expected {
        var succeeded = 0, failed = 0, hits = 0
        var cpu: [String: Double] = [:]
        var fetched: Int64 = 0, stored: Int64 = 0
    }

    func expected(_ db: TestDatabase) async throws -> [String: Expected] {
        let rows = try await db.query(
            """
            SELECT coalesce(fair_key, '') AS k, count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
                   count(*) FILTER (WHERE state = 'failed') AS failed, count(*) FILTER (WHERE cache_hit) AS hits,
                   coalesce(sum((timings->>'decode_cpu_ms')::float8), 0) AS decode, coalesce(sum((timings->>'process_cpu_ms')::float8), 0) AS process,
                   coalesce(sum((timings->>'encode_cpu_ms')::float8), 0) AS encode, coalesce(sum((timings->>'store_cpu_ms')::float8), 0) AS store,
                   coalesce(sum(source_bytes) FILTER (WHERE state = 'succeeded' AND NOT cache_hit), 0) AS fetched,
                   coalesce(sum(result_bytes) FILTER (WHERE state = 'succeeded' AND NOT cache_hit), 0) AS stored
            FROM halcyon.jobs GROUP BY 1
            """)
        var out: [String: Expected] = [:]
        for i in rows.rows.indices {
            func n(_ c: String) -> Double { Double(rows.value(i, c) ?? "") ?? -1 }
            out[rows.value(i, "k") ?? "?"] = Expected(
                succeeded: Int(n("succeeded")), failed: Int(n("failed")), hits: Int(n("hits")),
                cpu: ["decode": n("decode"), "process": n("process"), "encode": n("encode"), "store": n("store")],
                fetched: Int64(n("fetched")), stored: Int64(n("stored")))
        }
        return out
    }

    func check(_ report: JSONValue, against expected: [String: Expected], retriedKey: String) {
        let rows = report["rows"]?.arrayValue ?? []
        #expect(rows.count == expected.count, "\(report.jsonText)")
        for row in rows {
            let key = row["fair_key"]?.stringValue ?? ""
            guard let e = expected[key] else {
                Issue.record("a row for an unknown key: \(row.jsonText)")
                continue
            }
            func n(_ name: String) -> Double { row[name]?.numberValue ?? -1 }
            #expect(Int(n("succeeded")) == e.succeeded && Int(n("failed")) == e.failed && Int(n("store_hits")) == e.hits, "\(key): \(row.jsonText)")
            #expect(Int(n("retried")) == (key == retriedKey ? 1 : 0), "\(key): \(row.jsonText)")
            #expect(Int64(n("bytes_fetched")) == e.fetched && Int64(n("bytes_stored")) == e.stored, "\(key): \(row.jsonText)")
            for (stage, want) in e.cpu {
                let got = row["cpu_ms"]?[stage]?.numberValue ?? -1
                // Within 5 % (and the JSON's 0.1 ms rounding).
                #expect(abs(got - want) <= max(0.05 * want, 0.11), "\(key) \(stage): usage \(got) ms, the jobs' timings \(want) ms")
            }
        }
    }

    /// Two fair keys and the common share: successes, a permanent failure (404), a transient one
    /// (503 once) then a success, then store hits of results already made.
    @Test func usageAgreesWithTheJobsOwnRows() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("usage")
        let name = "usage-\(db.name).jpg"
        let url = try Origin.publish(name, Self.tiny)
        var values: [String] = []
        for (i, key) in ["a", "a", "a", "b", "b", nil, nil].enumerated() {
            values.append("('\(url)?j=\(i)', '\(Self.chain)', \(key.map { "'\($0)'" } ?? "NULL"), '{}', 5)")
        }
        values.append("('\(TestEnvironment.origin)/status/404?u=\(db.name)', '\(Self.chain)', 'b', '{}', 1)")
        values.append(
            "('\(TestEnvironment.origin)/fail/1/503/usage-\(db.name)/\(name)', '\(Self.chain)', 'a', '{\"retry\": {\"max\": 0}}', 5)")
        try await db.query(
            "INSERT INTO halcyon.jobs (source, processors, fair_key, options, max_attempts) VALUES \(values.joined(separator: ", "))")
        let w = try TestWorker(
            ["work", "--store", store.path, "--allow-network", "127.0.0.1/32", "--concurrency", "2", "--retry-base", "100ms"],
            conninfo: db.conninfo)
        try await w.ready()
        #expect(try await drained(db), "\(w.output.suffix(2000))")
        // Store hits: the same sources and chain again, for both keys.
        try await db.query(
            """
            INSERT INTO halcyon.jobs (source, processors, fair_key)
            VALUES ($1 || '?j=0', $2, 'a'), ($1 || '?j=1', $2, 'a'), ($1 || '?j=3', $2, 'b')
            """, [url, Self.chain])
        #expect(try await drained(db), "\(w.output.suffix(2000))")

        let want = try await expected(db)
        #expect(want["a"]?.succeeded == 6 && want["a"]?.hits == 2 && want["b"]?.failed == 1 && want["b"]?.hits == 1, "\(want)")
        let before = try await usage(db, ["--by", "fair-key", "--since", "1h"])
        check(before, against: want, retriedKey: "a")
        let total = before["total"]
        #expect(total?["succeeded"]?.numberValue == 11 && total?["failed"]?.numberValue == 1, "\(before.jsonText)")
        // The same sums by queue; only the total's `rows` (how many groups) differs: 1 queue, 3 keys.
        let byQueue = try await usage(db, [])
        func sums(_ v: JSONValue?) -> JSONValue? {
            guard case .object(var o) = v else { return nil }
            o["rows"] = nil
            return .object(o)
        }
        #expect(total?["rows"]?.numberValue == 3 && byQueue["total"]?["rows"]?.numberValue == 1, "\(byQueue.jsonText)")
        #expect(byQueue["rows"]?.arrayValue?.count == 1 && sums(byQueue["total"]) == sums(total), "\(byQueue.jsonText)")

        // The worker's own roll-up (its first run comes 5–30 s after start), then this test's of
        // whatever is left: the same report.
        #expect(try await w.waitForOutput("usage rolled up", timeout: 90), "\(w.output.suffix(2000))")
        let q = JobQueue(connection: try await db.connect())
        while try await q.rollUpUsage().events > 0 {}
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.usage_events").value(0, "n") == "0")
        let after = try await usage(db, ["--by", "fair-key", "--since", "1h"])
        #expect(after["rows"] == before["rows"] && after["total"] == total, "\(after.jsonText)\n\(before.jsonText)")
        let hourly = try await usage(db, ["--hourly", "--queue", "default"])
        #expect((hourly["rows"]?.arrayValue ?? []).allSatisfy { $0["hour"]?.stringValue?.hasSuffix(":00:00Z") == true }, "\(hourly.jsonText)")
        #expect(try await usage(db, ["--queue", "elsewhere"])["rows"]?.arrayValue?.isEmpty == true)
        w.signal(SIGTERM)
        #expect(await w.wait(timeout: 60) == 0)
    }

    // MARK: - What was spent

    /// A worker process with `arguments` on `db` (`halcyon-faults` when `fault` is set).
    func worker(_ db: TestDatabase, _ arguments: [String], fault: String? = nil) throws -> HalcyonProcess {
        try HalcyonProcess(
            [
                "work", "--no-progress", "--store", try TestEnvironment.temporaryDirectory("usage-store").path, "--allow-network", "127.0.0.1/32",
                "--fetch-retries", "0",
            ] + arguments, conninfo: db.conninfo, environment: fault.map { ["HALCYON_TEST_FAULT": $0] } ?? [:],
            executable: fault == nil ? TestEnvironment.binary : TestEnvironment.faultsBinary)
    }

    /// Usage per fair key, from `halcyon usage --json --by fair-key`.
    func usageByKey(_ db: TestDatabase) async throws -> [String: JSONValue] {
        let report = try await usage(db, ["--by", "fair-key", "--since", "1h"])
        var out: [String: JSONValue] = [:]
        for row in report["rows"]?.arrayValue ?? [] { out[row["fair_key"]?.stringValue ?? ""] = row }
        return out
    }

    /// The CPU milliseconds of decode, process and encode in a usage row: the stages that run on
    /// the image threads.
    func imageCPU(_ row: JSONValue?) -> Double {
        ["decode", "process", "encode"].reduce(0) { $0 + (row?["cpu_ms"]?[$1]?.numberValue ?? 0) }
    }

    /// Three jobs of two tenants share one source (claimed together: one download, one decode),
    /// beside a third tenant's job on a source of its own. The usage totals are what was spent:
    /// the bytes of one download, split among the three (each row's `source_bytes` still the
    /// source's size), and the CPU the worker's image threads used — the decode once, not three
    /// times — within 5 %, and no more than the image process's whole CPU. The job in the other
    /// group is billed its own source's bytes and its own decode, whole.
    @Test func jobsSharingASourceAreBilledWhatWasSpentOnce() async throws {
        let db = try await TestDatabase.create()
        let shared = try SampleImages.photo(width: 2400, height: 1800, seed: 31, format: .png)
        let own = try SampleImages.photo(width: 900, height: 600, seed: 32, format: .png)
        let sharedURL = try Origin.publish("usage-shared-\(db.name).png", shared)
        let ownURL = try Origin.publish("usage-own-\(db.name).png", own)
        try await db.query(
            """
            INSERT INTO halcyon.jobs (source, processors, fair_key) VALUES
                ($1, 'resize(200x150) |> format(jpeg)', 'a'), ($1, 'resize(320x240) |> format(webp)', 'a'),
                ($1, 'resize(100x100, mode=fill) |> format(png)', 'b'), ($2, 'resize(64x64) |> format(png)', 'c')
            """, [sharedURL, ownURL])
        let w = try worker(db, ["--drain", "--concurrency", "2"])
        let threads = ImageThreads(of: w.pid)
        #expect(await w.wait(timeout: 120) == 0, "\(w.output.suffix(2000))")
        let spent = threads.stop()

        let rows = try await db.query(
            """
            SELECT fair_key, state::text, source_bytes, (timings->>'fetched_bytes')::bigint AS fetched,
                   (timings->>'decode_cpu_ms')::float8 AS decode, timings->>'decode_ms' AS decode_wall
            FROM halcyon.jobs ORDER BY id
            """
        ).dictionaries
        #expect(rows.allSatisfy { $0["state"] == "succeeded" }, "\(rows)")
        let group = rows.prefix(3)
        #expect(group.allSatisfy { $0["source_bytes"] == String(shared.count) }, "source_bytes is the source's size: \(rows)")
        #expect(group.compactMap { Int(($0["fetched"] ?? nil) ?? "") }.reduce(0, +) == shared.count, "\(rows)")
        #expect(
            Set(group.map { $0["decode"] ?? nil }).count == 1 && Set(group.map { $0["decode_wall"] ?? nil }).count == 1, "one decode, shared: \(rows)"
        )
        #expect(rows[3]["fetched"] == String(own.count), "\(rows)")

        let byKey = try await usageByKey(db)
        let bytes = byKey.mapValues { Int($0["bytes_fetched"]?.numberValue ?? -1) }
        let (a, b) = (bytes["a"] ?? -1, bytes["b"] ?? -1)
        #expect(a + b == shared.count && abs(a - 2 * b) <= 2 && bytes["c"] == own.count, "\(bytes)")
        // Tenant b's decode is half of a's: one share against two.
        let decode = byKey.mapValues { $0["cpu_ms"]?["decode"]?.numberValue ?? -1 }
        #expect(abs((decode["a"] ?? -1) - 2 * (decode["b"] ?? 1)) <= 0.25, "\(decode)")
        let billed = byKey.values.reduce(0) { $0 + imageCPU($1) } / 1000
        let total = byKey.values.reduce(0) { $0 + ($1["cpu_ms"]?["total"]?.numberValue ?? 0) } / 1000
        print(
            "billed \(billed) s of image CPU (\(decode) ms of decode), the image threads used \(spent.seconds) s; \(total) s in all of \(spent.processes) s"
        )
        #expect(
            spent.seconds > 0.05 && abs(billed - spent.seconds) <= 0.05 * spent.seconds,
            "billed \(billed) s, the image threads used \(spent.seconds) s")
        #expect(total <= spent.processes * 1.05, "billed \(total) s, more than the worker's processes used (\(spent.processes) s)")
    }

    /// A job whose chain runs past `--max-job-time` (a step computing for 1.5 CPU seconds against a
    /// 1 s deadline) fails with `image.too_costly` and is billed what it spent — at least those
    /// 1.5 s, and with the job beside it what the image threads used, within 5 %. The job beside
    /// it, another tenant's in a group of its own, is unaffected.
    @Test func aJobPastItsDeadlineIsBilledItsCPU() async throws {
        let db = try await TestDatabase.create()
        let image = try SampleImages.photo(width: 600, height: 400, seed: 33, format: .png)
        let slow = try Origin.publish("usage-burn-\(db.name).png", image)
        let beside = try Origin.publish("usage-beside-\(db.name).png", image)
        try await db.query(
            "INSERT INTO halcyon.jobs (source, processors, fair_key) VALUES ($1, 'resize(100x100) |> format(png)', 'a'), ($2, 'resize(90x90) |> format(png)', 'b')",
            [slow, beside])
        // Unsupervised: on a busy machine 1.5 CPU seconds may take longer than the supervisor's
        // wait for a call stuck past the deadline, and this is about the deadline within.
        let w = try worker(db, ["--drain", "--concurrency", "1", "--max-job-time", "1s", "--no-supervise"], fault: "burn:usage-burn")
        let threads = ImageThreads(of: w.pid)
        #expect(await w.wait(timeout: 120) == 0, "\(w.output.suffix(2000))")
        let spent = threads.stop()
        let rows = try await db.query(
            "SELECT fair_key, state::text, errors->-1->>'code' AS code, (timings->>'process_cpu_ms')::float8 AS process FROM halcyon.jobs ORDER BY id"
        ).dictionaries
        #expect(rows[0]["state"] == "failed" && rows[0]["code"] == "image.too_costly", "\(rows)")
        #expect(rows[1]["state"] == "succeeded", "\(rows)")
        let byKey = try await usageByKey(db)
        #expect(byKey["a"]?["failed"]?.numberValue == 1 && byKey["b"]?["succeeded"]?.numberValue == 1, "\(byKey)")
        let a = imageCPU(byKey["a"]) / 1000, b = imageCPU(byKey["b"]) / 1000
        print("billed a \(a) s, b \(b) s; the image threads used \(spent.seconds) s")
        #expect(a >= 1.5, "the job past its deadline computed 1.5 s, billed \(a) s")
        #expect(abs(a + b - spent.seconds) <= 0.05 * spent.seconds, "billed \(a + b) s, the image threads used \(spent.seconds) s")
        #expect(b > 0 && b < 0.5, "the job beside it: \(b) s")
    }

    /// A job stuck in one call, computing, past `--max-job-time`: the supervisor ends the image
    /// process. The stuck job fails with `image.too_costly` and is billed what it spent up to the
    /// kill; the job in processing beside it (another tenant's, computing too, in this process
    /// only) is charged as a bystander, billed its own work, runs again and is billed that run —
    /// nothing twice: the two tenants' CPU adds up to what the image threads of both processes
    /// used, within 5 % (and what a thread of the killed process could have used between the
    /// test's last look and its death).
    @Test(.processes(2)) func aStuckJobKilledAndItsBystanderAreBilledWhatTheySpentOnce() async throws {
        let db = try await TestDatabase.create()
        let image = try SampleImages.photo(width: 300, height: 200, seed: 34, format: .png)
        let stuck = try Origin.publish("usage-stuck-\(db.name).png", image)
        let beside = try Origin.publish("usage-spinfirst-\(db.name).png", image).split(separator: "/").last!
        try await db.query(
            "INSERT INTO halcyon.jobs (source, processors, fair_key) VALUES ($1, 'resize(40x40) |> format(png)', 'a'), ($2, 'resize(50x50) |> format(png)', 'b')",
            [stuck, "\(TestEnvironment.origin)/slowfile/1.5/\(beside)"])
        let w = try worker(db, ["--drain", "--concurrency", "2", "--max-job-time", "1s"], fault: "spin:usage-stuck;spinfirst:usage-spinfirst")
        let threads = ImageThreads(of: w.pid)
        #expect(await w.wait(timeout: 120) == 0, "\(w.output.suffix(3000))")
        let spent = threads.stop()
        let rows = try await db.query(
            """
            SELECT fair_key, state::text, attempt, errors->-1->>'code' AS code,
                   (SELECT count(*) FROM jsonb_array_elements(errors) e WHERE e->>'bystander' = 'true') AS bystander
            FROM halcyon.jobs ORDER BY id
            """
        ).dictionaries
        #expect(rows[0]["state"] == "failed" && rows[0]["code"] == "image.too_costly" && rows[0]["attempt"] == "1", "\(rows)")
        #expect(rows[1]["state"] == "succeeded" && rows[1]["attempt"] == "2" && rows[1]["bystander"] == "1", "\(rows)")
        let byKey = try await usageByKey(db)
        #expect(byKey["a"]?["failed"]?.numberValue == 1, "\(byKey)")
        #expect(byKey["b"]?["retried"]?.numberValue == 1 && byKey["b"]?["succeeded"]?.numberValue == 1, "\(byKey)")
        let a = imageCPU(byKey["a"]) / 1000, b = imageCPU(byKey["b"]) / 1000
        print("billed a \(a) s, b \(b) s; the image threads used \(spent.seconds) s (up to \(spent.slop) s unseen)")
        #expect(a > 0.1 && b > 0.05, "a \(a) s, b \(b) s")
        #expect(
            a + b >= 0.95 * spent.seconds && a + b <= 1.05 * spent.seconds + spent.slop,
            "billed \(a + b) s, the image threads used \(spent.seconds) s (+ up to \(spent.slop) s)")
    }
}

/// The CPU time of the image threads (`halcyon.image`) of a process and its children — a
/// supervised worker's image processes, one after another — read from `/proc` every 10 ms until
/// `stop`: what the processes themselves say they spent on image work. A thread that ends keeps
/// its last reading; for a process that died, `slop` is what its threads could have used between
/// the last look that saw them and the first that found them gone.
final class ImageThreads: Sendable {
    struct Spent {
        /// CPU seconds of the image threads.
        var seconds: Double
        /// What the image threads of processes that died may have used unseen.
        var slop: Double
        /// CPU seconds of the processes themselves (the supervisor and its children), everything.
        var processes: Double
    }
    private struct State {
        var threads: [String: Double] = [:]
        var processes: [pid_t: Double] = [:]
        var seen: [pid_t: (at: ContinuousClock.Instant, threads: Int)] = [:]
        var slop = 0.0
        var stopped = false
    }
    private let state = Mutex(State())

    init(of root: pid_t) {
        Thread.detachNewThread { [self] in
            while !state.withLock({ $0.stopped }) {
                look(root)
                usleep(10_000)
            }
        }
    }

    private func look(_ root: pid_t) {
        let now = ContinuousClock.now
        var found: [pid_t: [String: Double]] = [:], cpu: [pid_t: Double] = [:]
        for pid in [root] + ProcessMemory.children(of: root) {
            // utime + stime of the whole process (clock ticks of 10 ms).
            if let stat = KernelFile.text("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") {
                let f = stat[stat.index(after: close)...].split(separator: " ")
                if f.count > 13, let u = Double(f[11]), let s = Double(f[12]) { cpu[pid] = (u + s) / 100 }
            }
            for tid in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
                guard KernelFile.text("/proc/\(pid)/task/\(tid)/comm")?.hasPrefix("halcyon.image") == true,
                    let tid = Int32(tid), let seconds = ThreadCPU.seconds(thread: tid, process: pid)
                else { continue }
                found[pid, default: [:]]["\(pid)/\(tid)"] = seconds
            }
        }
        state.withLock { s in
            for (pid, threads) in found {
                for (key, seconds) in threads { s.threads[key] = max(s.threads[key] ?? 0, seconds) }
                s.seen[pid] = (now, threads.count)
            }
            for (pid, seconds) in cpu { s.processes[pid] = max(s.processes[pid] ?? 0, seconds) }
            // A process whose image threads are gone: it died (or ended) since it was last seen.
            for (pid, last) in s.seen where found[pid] == nil {
                s.slop += (now - last.at).seconds * Double(last.threads)
                s.seen[pid] = nil
            }
        }
    }

    /// Stops looking; what was seen.
    func stop() -> Spent {
        state.withLock { s in
            s.stopped = true
            return Spent(seconds: s.threads.values.reduce(0, +), slop: s.slop, processes: s.processes.values.reduce(0, +))
        }
    }
}
