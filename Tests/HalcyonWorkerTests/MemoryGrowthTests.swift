import Foundation
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import HalcyonSamples
import HalcyonTestSupport
import Testing

/// What a job leaves behind in the image process: nothing. Each job used to leave a libdispatch
/// timer per processing phase (its `--max-job-time` deadline), kept with its closures until it
/// fired — about a kilobyte per job for the deadline's length, so a busy worker grew linearly
/// (#42). A regression shows as resident memory rising with the jobs done; with `--max-job-time
/// 1h`, anything kept until a deadline is kept for the whole run.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, binary)"), .processes)
struct MemoryGrowthTests {
    /// 8,000 tiny jobs (two formats in, three chains, distinct keys) through one supervised
    /// worker with one processing slot; the image process's resident set, the median of its
    /// samples around job 2,000 (after warm-up) and over the last 400. Memory, not time, is
    /// measured: a loaded machine makes the run slower, not the figures larger.
    @Test func theImageProcessDoesNotGrowWithTheJobsItRuns() async throws {
        let db = try await TestDatabase.create()
        let root = try TestEnvironment.temporaryDirectory("growth-sources")
        try SampleImages.photo(width: 48, height: 36, seed: 1).write(to: root.appendingPathComponent("a.jpg"))
        try SampleImages.photo(width: 40, height: 40, seed: 2, format: .png, alpha: true).write(to: root.appendingPathComponent("b.png"))
        let jobs = 8000
        _ = try await db.query(
            """
            INSERT INTO halcyon.jobs (source, processors, cache_key)
            SELECT 'file://' || $1 || (ARRAY['/a.jpg', '/b.png'])[g % 2 + 1],
                   (ARRAY['resize(24x24, mode=fill) |> format(jpeg, quality=80)', 'resize(20x20) |> format(png)',
                          'crop(16x16) |> flip |> format(webp)'])[g % 3 + 1],
                   'growth-' || g
            FROM generate_series(1, $2::int) AS g
            """, [root.path, String(jobs)])
        let worker = try HalcyonProcess(
            [
                "work", "--drain", "--store", try TestEnvironment.temporaryDirectory("growth-store").path, "--file-root", root.path,
                "--concurrency", "1", "--max-job-time", "1h", "--sweep-interval", "0s", "--log-level", "warning",
            ], conninfo: db.conninfo)
        let c = try await db.connect()
        defer { Task { await c.close() } }
        var early: [Int] = [], late: [Int] = []
        var done = 0
        let deadline = ContinuousClock.now + .seconds(600)
        while worker.isRunning, ContinuousClock.now < deadline {
            done = Int(try await c.execute("SELECT count(*) AS n FROM halcyon.jobs WHERE state = 'succeeded'").value(0, "n") ?? "0") ?? 0
            if let image = worker.children.first, let rss = ProcessMemory.residentRSS(of: image) {
                if (1800...2200).contains(done) { early.append(rss) }
                if done >= jobs - 400 { late.append(rss) }
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(await worker.wait(timeout: 60) == 0, "\(worker.output.suffix(2000))")
        done = Int(try await c.execute("SELECT count(*) AS n FROM halcyon.jobs WHERE state = 'succeeded'").value(0, "n") ?? "0") ?? 0
        #expect(done == jobs)
        try #require(!early.isEmpty && !late.isEmpty, "samples around job 2000 (\(early.count)) and near the end (\(late.count))")
        func median(_ v: [Int]) -> Int { v.sorted()[v.count / 2] }
        let growth = median(late) - median(early)
        print(
            "image process: \(median(early) / 1024) KiB at job ~2000, \(median(late) / 1024) KiB at job ~\(jobs - 200): "
                + "\(growth / (jobs - 2200)) bytes per job")
        // About 5,800 jobs apart: the timers kept about 1.2 KB per job (6–7 MB here); the fixed
        // worker's level moved by about 2 MB (the allocator settling), so the bound sits between.
        #expect(growth < 4_000_000, "the image process grew \(growth) bytes over about \(jobs - 2200) jobs")
    }
}
