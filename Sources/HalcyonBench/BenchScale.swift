import Foundation
import HalcyonBacklog
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

    /// S: for each size (and the largest again over fair keys), a `Backlog` of that many queued
    /// jobs, topped up as jobs finish; two
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
        let sizes = Set(Self.scaleSizes.map({ max(1000, Int(Double($0) * scale)) })).sorted()
        // Each size without fair keys, then the largest again spread over fair keys (a hundred
        // jobs a key at any scale): the fair claim's round-robin at a million.
        let shapes = sizes.map { ($0, 0) } + (sizes.last.map { [($0, max(10, $0 / 100))] } ?? [])
        for (size, fairKeys) in shapes {
            var backlog = Backlog(queued: size, sources: sources.urls, failingSource: Self.failingSource)
            backlog.fairKeys = fairKeys
            try await backlog.remove(c)
            let shape = fairKeys > 0 ? "\(size) queued jobs over \(fairKeys) fair keys" : "\(size) queued jobs"
            print("S: \(shape): writing the backlog…")
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
                try await Backlog.analyzeJobs(c)
                let window = Duration.seconds(max(2, 20 * min(1, scale)))
                let measured = try await work { _, t in t >= window }
                throughput = Double(measured.finished) / measured.elapsed.seconds
            } catch {
                await workers.stop()
                throw error
            }
            await workers.stop()
            print("S: \(shape): two workers " + String(format: "%.0f", throughput) + " jobs/s; the hot statements…")
            let statements = try await timeStatements(conninfo: conninfo)
            let run = ScaleRun(queued: size, fairKeys: fairKeys, rows: rows, jobsPerSecond: throughput, statements: statements)
            print("S: \(run.line)")
            out.append(run)
            try await backlog.remove(c)
            if fairKeys > 0 { try await JobQueue(connection: c).forgetIdleFairKeys(limit: fairKeys + 1) }
        }
        return out
    }

    /// The soak: `jobs` queued jobs (a `Backlog` without delayed or failing rows, so its tenths
    /// compare steady work: a failing job's retries, backed off, would all come at the end)
    /// drained by two `halcyon work --drain` processes; throughput and each worker's processes'
    /// RSS (its supervisor and its image process apart) per tenth of the run. The workload varies
    /// as an application's does: `soakSources` (64 to 640 px; JPEG with and without an EXIF
    /// orientation, PNG with and without alpha, WebP, GIF, an animation) through `soakChains`
    /// (fill, fit, stretch, crop, effects, three output formats), one logical source in ten
    /// sharing hot cache keys (store hits), the rest processed.
    func runSoak(jobs: Int, conninfo: String, scratch: URL) async throws -> SoakRun {
        let c = try await PGConnection.connect(conninfo, label: "bench-soak")
        defer { Task { await c.close() } }
        try await Self.ensureOnlyBenchJobs(c)
        let sources = try Self.soakSources(in: scratch)
        var backlog = Backlog(queued: jobs, history: jobs / 2, sources: sources.urls)
        backlog.delayedEvery = nil
        backlog.chains = Self.soakChains
        backlog.hotEvery = 10
        try await backlog.remove(c)
        print("soak: writing \(jobs) queued jobs…")
        try await backlog.fill(c)
        let store = scratch.appendingPathComponent("store-soak-\(getpid())")
        try? FileManager.default.removeItem(at: store)
        defer { try? FileManager.default.removeItem(at: store) }
        let started = Date(), clock = ContinuousClock.now
        let workers = try WorkerPair.start(self, conninfo: conninfo, store: store, fileRoot: sources.directory, scratch: scratch, drain: true)
        var run = SoakRun(jobs: jobs)
        run.workload = "\(sources.urls.count) sources of 4 formats, 64–640 px; \(Self.soakChains.count) chains; one source in 10 a store hit"
        var imagePIDs: [Set<pid_t>] = workers.pids.map { _ in [] }
        var nextCount = clock, lastPrint = clock
        do {
            while !workers.allExited {
                let now = ContinuousClock.now
                let trees = workers.trees()
                for (i, tree) in trees.enumerated() { imagePIDs[i].formUnion(tree.imagePIDs) }
                run.samples.append(SoakRun.TreeSample(seconds: (now - clock).seconds, trees: trees.map(\.rss)))
                // Counting reads the finished rows' index: at most every twenty times what it took.
                if now >= nextCount {
                    let finished = try await Self.finished(since: started, on: c)
                    run.finished.append(SoakRun.Sample(seconds: (now - clock).seconds, value: finished))
                    nextCount = .now + max(.milliseconds(100), (ContinuousClock.now - now) * 20)
                }
                if now - lastPrint >= .seconds(10) {
                    let images = trees.map { SoakRun.mb($0.rss.image) }.joined(separator: ", ")
                    print(
                        String(format: "soak: %d of about %d jobs after %.0f s", run.finished.last?.value ?? 0, jobs, (now - clock).seconds)
                            + "; image processes \(images) MB")
                    lastPrint = now
                }
                try await Task.sleep(for: .milliseconds(100))
            }
        } catch {
            await workers.stop()
            throw error
        }
        run.imageRestarts = imagePIDs.map { max(0, $0.count - 1) }
        try workers.checkExits()
        run.finished.append(SoakRun.Sample(seconds: (ContinuousClock.now - clock).seconds, value: try await Self.finished(since: started, on: c)))
        try await backlog.remove(c)
        return run
    }

    /// The soak's chains: fill, fit, stretch and crop, effects, JPEG, WebP and PNG out; each
    /// logical source is enqueued with all of them (one decode, a clone per chain). No GIF
    /// output (every chain names its format, so a GIF source is not kept one): ImageMagick 6's
    /// palette for it fills a 128 MiB colour cache per encode, which would swamp what a job
    /// leaves behind.
    static let soakChains = [
        "resize(120x120, mode=fill) |> format(jpeg, quality=80)",
        "resize(480x480) |> format(webp, quality=75)",
        "resize(64x64, mode=fill) |> format(png)",
        "crop(200x150, x=0.3) |> blur(2) |> format(jpeg)",
        "resize(320x240, mode=stretch) |> round_corner(12) |> flip |> format(png)",
        "resize(256x256) |> sharpen(1) |> color_controls(saturation=1.2) |> format(webp)",
        "downsample(200x200) |> rotate(90) |> overlay(#336699, fraction=0.3) |> strip |> format(jpeg, quality=70)",
    ]

    /// Twelve images of four formats, 64 to 640 px, under `scratch/soak`, as `file://` URLs: JPEG
    /// (one with an EXIF orientation), PNG (with and without alpha), WebP (with and without),
    /// GIF and an animated GIF.
    static func soakSources(in scratch: URL) throws -> (directory: URL, urls: [String]) {
        let dir = scratch.appendingPathComponent("soak")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let specs: [(name: String, make: () throws -> Data)] = [
            ("a.jpg", { try SampleImages.photo(width: 160, height: 120, seed: 11) }),
            ("b.jpg", { try SampleImages.photo(width: 640, height: 480, seed: 12, quality: 80) }),
            ("c.jpg", { SampleImages.withEXIFOrientation(try SampleImages.photo(width: 400, height: 300, seed: 13), 6) }),
            ("d.png", { try SampleImages.photo(width: 200, height: 150, seed: 14, format: .png, alpha: true) }),
            ("e.webp", { try SampleImages.photo(width: 320, height: 240, seed: 15, format: .webp) }),
            ("f.jpg", { try SampleImages.photo(width: 300, height: 500, seed: 16) }),
            ("g.png", { try SampleImages.photo(width: 400, height: 300, seed: 17, format: .png) }),
            ("h.gif", { try SampleImages.photo(width: 240, height: 180, seed: 18, format: .gif) }),
            ("i.webp", { try SampleImages.photo(width: 480, height: 300, seed: 19, format: .webp, alpha: true) }),
            ("j.jpg", { try SampleImages.photo(width: 64, height: 64, seed: 20) }),
            ("k.gif", { try SampleImages.animatedGIF(frames: 4, width: 120, height: 90) }),
            ("l.png", { try SampleImages.photo(width: 256, height: 256, seed: 21, format: .png) }),
        ]
        var urls: [String] = []
        for (name, make) in specs {
            let file = dir.appendingPathComponent(name)
            if !FileManager.default.fileExists(atPath: file.path) { try make().write(to: file) }
            urls.append("file://" + file.path)
        }
        return (dir, urls)
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
    /// calls, on a connection that prepares its statements as a worker's does), by a probe
    /// worker of its own: claims of 6 with siblings, each heartbeat once, its first job failed
    /// (a retry) and the rest completed together; claims of 250 store hits, released; claims
    /// with a lapsed lease, rescued; webhook takes; the dashboard's overview; and the claim
    /// again unprepared (parsed and planned each time), and with the server's own settings
    /// (unprepared, JIT as configured).
    func timeStatements(conninfo: String, samples: Int = 200) async throws -> [StatementTiming] {
        let c = try await PGConnection.connect(conninfo, label: "bench-probe", preparing: true)
        let unprepared = try await PGConnection.connect(conninfo, label: "bench-probe-unprepared")
        let server = try await PGConnection.connect(conninfo, label: "bench-probe-server", settings: .server)
        defer {
            Task {
                await c.close(); await unprepared.close(); await server.close()
            }
        }
        let queue = JobQueue(connection: c), unpreparedQueue = JobQueue(connection: unprepared), serverQueue = JobQueue(connection: server)
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
            let jobs = try await timed(StatementTiming.claim) { try await queue.claim(workerID: me, limit: 6, lease: .seconds(30)) }
            guard let first = jobs.first else { break }
            _ = try await timed("heartbeat") { try await queue.heartbeat(jobs.map(\.claim), workerID: me, lease: .seconds(30)) }
            _ = try await timed("fail (retry)") { try await queue.fail(first.claim, workerID: me, error: transient, retryDelay: .days(1)) }
            if jobs.count > 1 {
                _ = try await timed("complete (group commit)") {
                    try await queue.complete(batch: jobs.dropFirst().map { ($0.claim, result, StageTimings()) }, workerID: me)
                }
            }
        }
        for (name, other) in [(StatementTiming.unpreparedClaim, unpreparedQueue), (StatementTiming.serverClaim, serverQueue)] {
            for _ in 0..<max(1, samples / 4) {
                let jobs = try await timed(name) { try await other.claim(workerID: me, limit: 6, lease: .seconds(30)) }
                _ = try await queue.release(jobs.map(\.claim), workerID: me)
            }
        }
        for _ in 0..<max(1, samples / 10) {
            let jobs = try await timed("claim 250 (store hits)") {
                try await queue.claim(workerID: me, limit: 250, lease: .seconds(30), siblings: false)
            }
            _ = try await timed("release 250") { try await queue.release(jobs.map(\.claim), workerID: me) }
        }
        for _ in 0..<max(1, samples / 4) {
            _ = try await queue.claim(workerID: me, limit: 6, lease: .milliseconds(1))
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

    /// One worker's processes now: the supervisor's resident set, its image processes' (their
    /// sum; one but while it is restarted) and their pids.
    struct TreeNow {
        var rss: SoakRun.Tree
        var imagePIDs: [pid_t]
    }

    /// Each worker's tree now, in the order of `pids`.
    func trees() -> [TreeNow] {
        pids.map { pid in
            let children = ProcessMemory.children(of: pid)
            let images = children.compactMap { ProcessMemory.residentRSS(of: $0) }
            return TreeNow(
                rss: SoakRun.Tree(supervisor: ProcessMemory.residentRSS(of: pid), image: images.isEmpty ? nil : images.reduce(0, +)),
                imagePIDs: children)
        }
    }

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
