import Foundation
import HalcyonCLI
import HalcyonDomain
import HalcyonEmbedded
import HalcyonQueue
import HalcyonRuntime
import HalcyonSamples

/// S and the soak: the queue with a backlog, on the bench database's settings (the embedded
/// cluster runs PostgreSQL's defaults, JIT on).
extension Bench {
    /// Queued jobs S builds a backlog of (each × --scale).
    static let scaleSizes = [10_000, 100_000, 1_000_000]

    /// S: for each size, a `Backlog` of that many queued jobs, topped up as jobs finish; two
    /// workers work through it for a while (2,000 finished jobs × --scale, at least 200) and the
    /// table is analyzed, as autovacuum would; then their throughput over 20 s (× --scale, at
    /// least 2 s); then, with
    /// the workers stopped, each hot statement's latency through the queue's own API.
    func runScale(conninfo: String, scratch: URL) async throws -> [ScaleRun] {
        let c = try await PGConnection.connect(conninfo, label: "bench-scale")
        defer { Task { await c.close() } }
        try await Self.ensureOnlyBenchJobs(c)
        let sources = try Self.backlogSources(in: scratch)
        var out: [ScaleRun] = []
        for size in Set(Self.scaleSizes.map({ max(1000, Int(Double($0) * scale)) })).sorted() {
            let backlog = Backlog(queued: size, sources: sources.urls, failingSource: Self.failingSource)
            try await backlog.remove(c)
            print("S: \(size) queued jobs: writing the backlog…")
            let filled = ContinuousClock.now, filledAt = Date()
            try await backlog.fill(c)
            let rows = try await c.row(BenchSQL.CountJobs())?.n ?? 0
            print("S: \(rows) rows written in \(TimeSpan.format((ContinuousClock.now - filled).seconds)); two workers…")
            let store = scratch.appendingPathComponent("store-scale-\(getpid())")
            try? FileManager.default.removeItem(at: store)
            defer { try? FileManager.default.removeItem(at: store) }
            let workers = try WorkerPair.start(self, conninfo: conninfo, store: store, fileRoot: sources.directory, scratch: scratch, drain: false)
            // An application keeps enqueueing: every 250 ms, one new job for each finished one,
            // so that `size` stay queued however long the measurement.
            var fed = size
            func work(until done: (_ finished: Int, _ elapsed: Duration) -> Bool) async throws -> (finished: Int, elapsed: Duration) {
                let start = ContinuousClock.now
                let before = try await Self.finished(since: filledAt, on: c)
                while true {
                    let n = try await Self.finished(since: filledAt, on: c)
                    if size + n > fed {
                        try await backlog.enqueue(c, jobs: fed..<(size + n))
                        fed = size + n
                    }
                    let elapsed = ContinuousClock.now - start
                    if done(n - before, elapsed) { return (n - before, elapsed) }
                    if workers.allExited {
                        try workers.checkExits()
                        throw CommandFailure("the workers stopped; see \(workers.logs.joined(separator: ", "))")
                    }
                    try await Task.sleep(for: .milliseconds(250))
                }
            }
            let throughput: Double
            do {
                // A period of work (2,000 jobs, or a minute for a slow build), as autovacuum's
                // ANALYZE would follow it; then the measured window.
                let warm = max(200, Int(2000 * min(1, scale)))
                _ = try await work { n, t in n >= warm || t >= .seconds(60) }
                try await c.run(BenchSQL.AnalyzeJobs())
                let window = Duration.seconds(max(2, 20 * min(1, scale)))
                let measured = try await work { _, t in t >= window }
                throughput = Double(measured.finished) / measured.elapsed.seconds
            } catch {
                await workers.stop()
                throw error
            }
            await workers.stop()
            print(String(format: "S: %d queued: two workers %.0f jobs/s; the hot statements…", size, throughput))
            let statements = try await timeStatements(conninfo: conninfo)
            let run = ScaleRun(queued: size, rows: rows, jobsPerSecond: throughput, statements: statements)
            print("S: \(run.line)")
            out.append(run)
            try await backlog.remove(c)
        }
        return out
    }

    /// The soak: `jobs` queued jobs (a `Backlog` without delayed or failing rows, so its tenths
    /// compare steady work: a failing job's retries, backed off, would all come at the end)
    /// drained by two `halcyon work --drain` processes; throughput and the workers' RSS per
    /// tenth of the run.
    func runSoak(jobs: Int, conninfo: String, scratch: URL) async throws -> SoakRun {
        let c = try await PGConnection.connect(conninfo, label: "bench-soak")
        defer { Task { await c.close() } }
        try await Self.ensureOnlyBenchJobs(c)
        let sources = try Self.backlogSources(in: scratch)
        var backlog = Backlog(queued: jobs, history: jobs / 2, sources: sources.urls)
        backlog.delayedEvery = nil
        try await backlog.remove(c)
        print("soak: writing \(jobs) queued jobs…")
        try await backlog.fill(c)
        let store = scratch.appendingPathComponent("store-soak-\(getpid())")
        try? FileManager.default.removeItem(at: store)
        defer { try? FileManager.default.removeItem(at: store) }
        let started = Date(), clock = ContinuousClock.now
        let workers = try WorkerPair.start(self, conninfo: conninfo, store: store, fileRoot: sources.directory, scratch: scratch, drain: true)
        var run = SoakRun(jobs: jobs)
        var nextCount = clock, lastPrint = clock
        do {
            while !workers.allExited {
                let now = ContinuousClock.now
                if let rss = workers.residentBytes().max() { run.rss.append(SoakRun.Sample(seconds: (now - clock).seconds, value: rss)) }
                // Counting reads the finished rows' index: at most every twenty times what it took.
                if now >= nextCount {
                    let finished = try await Self.finished(since: started, on: c)
                    run.finished.append(SoakRun.Sample(seconds: (now - clock).seconds, value: finished))
                    nextCount = .now + max(.milliseconds(100), (ContinuousClock.now - now) * 20)
                }
                if now - lastPrint >= .seconds(10) {
                    print(String(format: "soak: %d of about %d jobs after %.0f s", run.finished.last?.value ?? 0, jobs, (now - clock).seconds))
                    lastPrint = now
                }
                try await Task.sleep(for: .milliseconds(100))
            }
        } catch {
            await workers.stop()
            throw error
        }
        try workers.checkExits()
        run.finished.append(SoakRun.Sample(seconds: (ContinuousClock.now - clock).seconds, value: try await Self.finished(since: started, on: c)))
        try await backlog.remove(c)
        return run
    }

    /// Eight small images of three formats under `scratch/backlog`, as `file://` URLs.
    static func backlogSources(in scratch: URL) throws -> (directory: URL, urls: [String]) {
        let dir = scratch.appendingPathComponent("backlog")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var urls: [String] = []
        for i in 0..<8 {
            let (format, ext): (ImageFormat, String) = i % 4 == 3 ? (.png, "png") : i % 4 == 2 ? (.webp, "webp") : (.jpeg, "jpg")
            let file = dir.appendingPathComponent("source-\(i).\(ext)")
            if !FileManager.default.fileExists(atPath: file.path) {
                try SampleImages.photo(width: 160 + 16 * i, height: 120 + 8 * i, seed: UInt64(i + 1), format: format).write(to: file)
            }
            urls.append("file://" + file.path)
        }
        return (dir, urls)
    }

    /// A source that refuses connections: its jobs fail transiently and are retried.
    static let failingSource = "http://127.0.0.1:9/gone.jpg"

    static func finished(since: Date, on c: PGConnection) async throws -> Int {
        try await c.row(BenchSQL.FinishedSince(since: since))?.n ?? 0
    }

    /// Each hot statement's latency on the table as it is, through `JobQueue` (what a worker
    /// calls), by a probe worker of its own: claims of 6 with siblings, each heartbeat once,
    /// its first job failed (a retry) and the rest completed together; claims of 250 store
    /// hits, released; claims with a lapsed lease, rescued; webhook takes; the dashboard's
    /// overview; and the claim again with the server's own settings (JIT as configured).
    func timeStatements(conninfo: String, samples: Int = 200) async throws -> [StatementTiming] {
        let c = try await PGConnection.connect(conninfo, label: "bench-probe")
        let server = try await PGConnection.connect(conninfo, label: "bench-probe-server", settings: .server)
        defer {
            Task {
                await c.close(); await server.close()
            }
        }
        let queue = JobQueue(connection: c), serverQueue = JobQueue(connection: server)
        let me = "halcyon-bench-probe-\(getpid())"
        var ms: [String: [Double]] = [:]
        func timed<T>(_ name: String, _ body: () async throws -> T) async throws -> T {
            let started = ContinuousClock.now
            let value = try await body()
            ms[name, default: []].append((ContinuousClock.now - started).seconds * 1000)
            return value
        }
        let result = JobResult(
            key: "halcyon-bench:probe", digest: String(repeating: "0", count: 64), path: "objects/00/00/probe.jpg", bytes: 1, width: 1,
            height: 1, format: "jpeg", cacheHit: true, source: nil)
        let transient = HalcyonError(.timeout, "the bench's probe")
        for _ in 0..<samples {
            let jobs = try await timed(StatementTiming.claim) { try await queue.claim(workerID: me, limit: 6, lease: 30) }
            guard let first = jobs.first else { break }
            _ = try await timed("heartbeat") { try await queue.heartbeat(jobs.map(\.claim), workerID: me, lease: 30) }
            _ = try await timed("fail (retry)") { try await queue.fail(first.claim, workerID: me, error: transient, retryDelay: 86_400) }
            if jobs.count > 1 {
                _ = try await timed("complete (group commit)") {
                    try await queue.complete(batch: jobs.dropFirst().map { ($0.claim, result, StageTimings()) }, workerID: me)
                }
            }
        }
        for _ in 0..<max(1, samples / 4) {
            let jobs = try await timed(StatementTiming.serverClaim) { try await serverQueue.claim(workerID: me, limit: 6, lease: 30) }
            _ = try await queue.release(jobs.map(\.claim), workerID: me)
        }
        for _ in 0..<max(1, samples / 10) {
            let jobs = try await timed("claim 250 (store hits)") { try await queue.claim(workerID: me, limit: 250, lease: 30, siblings: false) }
            _ = try await timed("release 250") { try await queue.release(jobs.map(\.claim), workerID: me) }
        }
        for _ in 0..<max(1, samples / 4) {
            _ = try await queue.claim(workerID: me, limit: 6, lease: 0.001)
            try await Task.sleep(for: .milliseconds(5))
            _ = try await timed("rescue") { try await queue.rescueExpired() }
        }
        for _ in 0..<samples {
            _ = try await timed("webhook take") { try await queue.takeCallbacks(limit: 4, hold: .seconds(30)) }
        }
        for _ in 0..<max(1, samples / 10) {
            _ = try await timed("dashboard overview") { try await QueueOverview.load(c) }
        }
        return StatementTiming.order.compactMap { name in ms[name].map { StatementTiming(name: name, milliseconds: $0) } }
    }
}

/// Two `halcyon work` processes of the bench's.
struct WorkerPair {
    let pids: [pid_t]
    let logs: [String]
    private let exits = ExitBox()

    static func start(_ bench: Bench, conninfo: String, store: URL, fileRoot: URL, scratch: URL, drain: Bool) throws -> WorkerPair {
        var pids: [pid_t] = [], logs: [String] = []
        for i in 1...2 {
            let log = scratch.appendingPathComponent("scale-worker-\(i).log").path
            try? FileManager.default.removeItem(atPath: log)
            let args =
                [
                    "work", "--database-url", conninfo, "--store", store.path, "--file-root", fileRoot.path,
                    "--allow-network", "127.0.0.1/32", "--log-level", "warning", "--worker-id", "halcyon-bench-\(getpid())-\(i)",
                    "--no-progress", "--sweep-interval", "0s", "--fetch-retries", "0",
                ] + (drain ? ["--drain"] : []) + (bench.workerConcurrency.map { ["--concurrency", String($0)] } ?? [])
            pids.append(try Subprocess.spawn(bench.workerExecutable, args, outputPath: log))
            logs.append(log)
        }
        return WorkerPair(pids: pids, logs: logs)
    }

    /// The workers' resident set sizes now (of those still running).
    func residentBytes() -> [Int] { pids.compactMap { ProcessMemory.residentRSS(of: $0) } }

    /// Whether both have exited (reaped here).
    var allExited: Bool {
        for pid in pids where exits.status(of: pid) == nil {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid { exits.set(pid, status) }
        }
        return pids.allSatisfy { exits.status(of: $0) != nil }
    }

    /// Throws when a worker exited other than with 0.
    func checkExits() throws {
        for (pid, log) in zip(pids, logs) {
            if let status = exits.status(of: pid), status != 0 { throw CommandFailure("a worker exited with status \(status); see \(log)") }
        }
    }

    /// SIGTERM to both, and their exits waited for off the cooperative pool.
    func stop() async {
        for pid in pids where exits.status(of: pid) == nil { await Bench.stop(pid) }
    }
}

/// Exit statuses of reaped children.
private final class ExitBox: @unchecked Sendable {
    private let lock = NSLock()
    private var statuses: [pid_t: Int32] = [:]

    func status(of pid: pid_t) -> Int32? {
        lock.withLock { statuses[pid] }
    }

    func set(_ pid: pid_t, _ raw: Int32) {
        let signal = raw & 0x7F
        lock.withLock { statuses[pid] = signal == 0 ? (raw >> 8) & 0xFF : 128 + signal }
    }
}
