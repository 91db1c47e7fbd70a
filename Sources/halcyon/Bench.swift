import ArgumentParser
import Dispatch
import Foundation
import HalcyonCore
import HalcyonImage
import HalcyonQueue
import HalcyonStore

struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure W1, W2, H, L and S end to end through the queue, W1 beside ImageMagick's convert on the same files.",
        discussion: """
            W1: every corpus image → resize(320x320, mode=fill) |> format(jpeg, quality=82). The
            corpus is generated (seeded, photo-like) under $HALCYON_HOME/bench/corpus: by default
            100 × 1920×1080 JPEG q85, 30 × 4032×3024 JPEG q90 and 20 × 1200×800 PNG with alpha;
            --scale shrinks the counts for quick runs. Halcyon runs as a `halcyon work --drain`
            child (real queue, file:// sources, real store); its peak RSS and CPU come from wait4.
            Peers, when a real ImageMagick `convert` is installed (scripts/bench-peers-setup):
            naive (-resize WxH^ -gravity center -extent WxH) and tuned (-define jpeg:size as the
            shrink allows, one thread), one process per image, --concurrency at a time; and
            Pillow with draft() in --concurrency long-lived processes (scripts/bench-pillow.py).
            H: the W1 jobs again, copied to about 5,000, on the store W1 filled: store-hit jobs/s.
            L: an idle worker; 40 small jobs enqueued 50 ms apart; enqueue→start p50/p95/p99.
            W2: every source → three variants (the W1 chain, a 1024 fit WebP q80, a 64 fill PNG).
            S: 2,000 store-hit jobs drained with 10k and then 1M finished rows in the table (both
            × --scale): the cost per job of the large table against the small one.
            On the embedded database the bench uses its own database, halcyon_bench; a database
            given with --database-url must hold no jobs but the bench's (it refuses otherwise).
            """)

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Scale the corpus counts (1 = 100 + 30 + 20 images).")
    var scale: Double = 1
    @Option(name: .customLong("repeat"), help: "Runs per tool; medians are reported.")
    var repeats: Int = 3
    @Option(help: "Processing slots for Halcyon and parallel processes for the peers. Default: cores.")
    var concurrency: Int = ProcessInfo.processInfo.activeProcessorCount
    @Flag(help: "Skip the convert peers.")
    var noPeers = false
    @Flag(help: "Skip S (claim+complete cost with 10k against 1M rows in the table; inserting them takes a minute).")
    var noScale = false
    @Option(help: "Write the results as JSON here (default $HALCYON_HOME/bench/results.json).")
    var out: String?

    static let chain = "resize(320x320, mode=fill) |> format(jpeg, quality=82)"
    /// W2: three variants of every source (decoded once when the three share a claim).
    static let variants = [chain, "resize(1024x1024, mode=fit) |> format(webp, quality=80)", "resize(64x64, mode=fill) |> format(png)"]

    func validate() throws {
        guard scale > 0, scale <= 10 else { throw ValidationError("--scale must be in (0, 10]") }
        guard (1...20).contains(repeats) else { throw ValidationError("--repeat must be 1…20") }
        guard (1...256).contains(concurrency) else { throw ValidationError("--concurrency must be 1…256") }
    }

    func run() async throws {
        let home = EmbeddedCluster.defaultHome().appendingPathComponent("bench")
        let corpus = try BenchCorpus.ensure(in: home.appendingPathComponent("corpus"), scale: scale)
        print("corpus: \(corpus.summary), fingerprint \(corpus.fingerprint.prefix(16))")

        let conninfo = try await benchDatabase()
        var results: [BenchResult] = []
        var runs: [String: [BenchRun]] = [:]
        var hitRuns: [HitRun] = []
        var latencyRuns: [LatencyRun] = []
        for round in 1...repeats {
            let (h, hits) = try await runHalcyon(corpus, conninfo: conninfo, scratch: home.appendingPathComponent("scratch"))
            runs["halcyon", default: []].append(h)
            hitRuns.append(hits)
            print("round \(round): halcyon \(h.line)")
            print("round \(round): H \(hits.line)")
            let w2 = try await runW2(corpus, conninfo: conninfo, scratch: home.appendingPathComponent("scratch"))
            runs["halcyon W2", default: []].append(w2)
            print("round \(round): W2 \(w2.line.replacingOccurrences(of: "images", with: "sources").replacingOccurrences(of: "/image", with: "/source"))")
            let latency = try await runLatency(corpus, conninfo: conninfo, scratch: home.appendingPathComponent("scratch"))
            latencyRuns.append(latency)
            print("round \(round): L \(latency.line)")
            if !noPeers, let script = Self.pillowScript() {
                let r = try await runPillow(script, corpus, scratch: home.appendingPathComponent("scratch"))
                runs["pillow draft", default: []].append(r)
                print("round \(round): pillow draft \(r.line)")
            }
            if !noPeers, let convert = Self.realConvert() {
                for tuned in [true, false] {
                    let scratch = home.appendingPathComponent("scratch")
                    let r = try await Blocking.run { [self] in try runConvert(convert, corpus, tuned: tuned, scratch: scratch) }  // concurrentPerform blocks
                    runs[tuned ? "convert tuned" : "convert naive", default: []].append(r)
                    print("round \(round): convert \(tuned ? "tuned" : "naive") \(r.line)")
                }
            }
        }
        if !noPeers, Self.realConvert() == nil {
            print("peers skipped: no real ImageMagick `convert` (run scripts/bench-peers-setup)")
        }
        if !noPeers, Self.pillowScript() == nil {
            print("peer skipped: no Pillow for python3, or scripts/bench-pillow.py not found (run scripts/bench-peers-setup)")
        }
        for name in ["halcyon", "pillow draft", "convert tuned", "convert naive"] {
            if let r = runs[name] { results.append(BenchResult(tool: name, runs: r)) }
        }
        let scaleRuns = noScale ? [] : try await runScale(conninfo: conninfo, scratch: home.appendingPathComponent("scratch"))
        print(BenchResult.table(results, images: corpus.files.count, concurrency: concurrency, repeats: repeats))
        if let w2 = runs["halcyon W2"].map({ BenchResult(tool: "halcyon", runs: $0) }) {
            print(String(format: "W2 — three variants per source (320 fill JPEG, 1024 fit WebP, 64 fill PNG): %.1f sources/s (%.1f–%.1f), %.0f CPU ms/source, peak RSS %.0f MB\n",
                         w2.rate, w2.rateMin, w2.rateMax, w2.cpuMs, w2.peakMB))
        }
        print(HitRun.summary(hitRuns))
        print(LatencyRun.summary(latencyRuns))
        if !scaleRuns.isEmpty { print(ScaleRun.summary(scaleRuns)) }
        var json = BenchResult.json(results, corpus: corpus, concurrency: concurrency, chain: Self.chain)
        if case .object(var o) = json {
            o["H"] = HitRun.json(hitRuns)
            o["L"] = LatencyRun.json(latencyRuns)
            if let w2 = runs["halcyon W2"] {
                let r = BenchResult(tool: "halcyon", runs: w2)
                o["W2"] = ["chains": .array(Self.variants.map { .string($0) }), "sources_per_second_median": .number((r.rate * 100).rounded() / 100),
                           "cpu_ms_per_source": .number(r.cpuMs.rounded()), "peak_rss_bytes": .number(r.peakMB * 1e6)]
            }
            if !scaleRuns.isEmpty { o["S"] = ScaleRun.json(scaleRuns) }
            json = .object(o)
        }
        let outURL = URL(fileURLWithPath: out ?? home.appendingPathComponent("results.json").path)
        try Data(json.prettyText.utf8).write(to: outURL)
        print("results: \(outURL.path)")
    }

    /// The embedded cluster gets a database of its own; an explicit database is used as given.
    private func benchDatabase() async throws -> String {
        switch database.target {
        case .external(let c):
            _ = try await database.connect()
            return c
        case .embedded(let cluster):
            try cluster.ensureRunning()
            let admin = try await PGConnection.connect(cluster.conninfo)
            if try await admin.execute("SELECT 1 FROM pg_database WHERE datname = 'halcyon_bench'").count == 0 {
                try await admin.execute("CREATE DATABASE halcyon_bench")
            }
            await admin.close()
            let conninfo = cluster.conninfo.replacingOccurrences(of: "dbname=postgres", with: "dbname=halcyon_bench")
            let c = try await PGConnection.connect(conninfo)
            try await Migrator.migrate(c, migrations: Migrator.load(from: Migrator.locateDirectory()))
            await c.close()
            return conninfo
        }
    }

    /// W1, then H on the store W1 just filled.
    private func runHalcyon(_ corpus: BenchCorpus, conninfo: String, scratch: URL) async throws -> (w1: BenchRun, hits: HitRun) {
        let c = try await PGConnection.connect(conninfo)
        // The bench's worker drains whatever is queued, so it only runs on a database that
        // holds nothing but its own jobs, and it deletes only those.
        let foreign = try await c.execute("SELECT count(*) AS n FROM halcyon.jobs WHERE cache_key IS NULL OR cache_key NOT LIKE 'halcyon-bench:%'")
        guard foreign.value(0, "n") == "0" else {
            throw CommandFailure("this database holds jobs that are not the bench's; run the bench on the embedded default or an empty database of its own")
        }
        try await c.execute("DELETE FROM halcyon.jobs WHERE cache_key LIKE 'halcyon-bench:%'")
        try await c.execute("DELETE FROM halcyon.workers WHERE id LIKE 'halcyon-bench-%'")
        _ = try await JobQueue(connection: c).enqueue(batch: corpus.files.map { f in
            var j = JobQueue.NewJob(source: "file://" + f.path)
            j.processors = Self.chain
            j.cacheKey = "halcyon-bench:" + URL(fileURLWithPath: f.path).lastPathComponent
            return j
        })
        let store = scratch.appendingPathComponent("store-\(getpid())")
        try? FileManager.default.removeItem(at: store)
        defer { try? FileManager.default.removeItem(at: store) }
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        let started = Date()
        let progress = ProgressReporter(conninfo: conninfo, label: "images", expected: corpus.files.count, since: started)
        let usage = try await drainWorker(conninfo: conninfo, store: store, corpus: corpus, scratch: scratch)
        await progress.finish()
        let seconds = Date().timeIntervalSince(started)
        let ok = try await c.execute("""
            SELECT count(*) FILTER (WHERE state = 'succeeded' AND result_width = 320 AND result_height = 320 AND result_format = 'jpeg') AS ok
            FROM halcyon.jobs
            """).value(0, "ok").flatMap { Int($0) } ?? 0
        guard ok == corpus.files.count else { throw CommandFailure("only \(ok) of \(corpus.files.count) outputs are 320×320 JPEGs") }
        let w1 = BenchRun(seconds: seconds, cpuSeconds: usage.cpuSeconds, peakRSS: usage.peakRSS, images: corpus.files.count)

        // H: the same jobs again, copied to about 5,000, on the store W1 filled — every one a hit.
        let copies = max(1, 5000 / corpus.files.count)
        try await c.execute("""
            INSERT INTO halcyon.jobs (source, processors, cache_key)
            SELECT source, processors, cache_key FROM halcyon.jobs, generate_series(1, $1::int)
            WHERE cache_key LIKE 'halcyon-bench:%' AND state = 'succeeded'
            """, [String(copies)])
        try await c.execute("DELETE FROM halcyon.jobs WHERE cache_key LIKE 'halcyon-bench:%' AND state = 'succeeded'")
        let hitJobs = corpus.files.count * copies
        let hitStarted = Date()
        let hitUsage = try await drainWorker(conninfo: conninfo, store: store, corpus: corpus, scratch: scratch)
        let hitSeconds = Date().timeIntervalSince(hitStarted)
        let hits = try await c.execute("SELECT count(*) FILTER (WHERE state = 'succeeded' AND cache_hit) AS n FROM halcyon.jobs")
            .value(0, "n").flatMap { Int($0) } ?? 0
        await c.close()
        guard hits == hitJobs else { throw CommandFailure("H: only \(hits) of \(hitJobs) jobs were store hits") }
        return (w1, HitRun(jobs: hitJobs, seconds: hitSeconds, cpuSeconds: hitUsage.cpuSeconds))
    }

    /// W2: every source → the three `variants`, enqueued together so a claim holds a source's
    /// three jobs and decodes it once. Every output's size and format is checked.
    private func runW2(_ corpus: BenchCorpus, conninfo: String, scratch: URL) async throws -> BenchRun {
        let c = try await PGConnection.connect(conninfo)
        defer { Task { await c.close() } }
        try await c.execute("DELETE FROM halcyon.jobs WHERE cache_key LIKE 'halcyon-bench:%'")
        _ = try await JobQueue(connection: c).enqueue(batch: corpus.files.flatMap { f in
            Self.variants.map { chain in
                var j = JobQueue.NewJob(source: "file://" + f.path)
                j.processors = chain
                j.cacheKey = "halcyon-bench:w2-" + URL(fileURLWithPath: f.path).lastPathComponent
                return j
            }
        })
        let store = scratch.appendingPathComponent("store-w2-\(getpid())")
        try? FileManager.default.removeItem(at: store)
        defer { try? FileManager.default.removeItem(at: store) }
        let started = Date()
        let usage = try await drainWorker(conninfo: conninfo, store: store, corpus: corpus, scratch: scratch)
        let seconds = Date().timeIntervalSince(started)
        let ok = try await c.execute("""
            SELECT count(*) FILTER (WHERE state = 'succeeded' AND (
                (result_format = 'jpeg' AND result_width = 320 AND result_height = 320) OR
                (result_format = 'webp' AND greatest(result_width, result_height) = 1024) OR
                (result_format = 'png' AND result_width = 64 AND result_height = 64))) AS ok
            FROM halcyon.jobs WHERE cache_key LIKE 'halcyon-bench:w2-%'
            """).value(0, "ok").flatMap { Int($0) } ?? 0
        guard ok == corpus.files.count * 3 else { throw CommandFailure("W2: only \(ok) of \(corpus.files.count * 3) outputs are as asked") }
        return BenchRun(seconds: seconds, cpuSeconds: usage.cpuSeconds, peakRSS: usage.peakRSS, images: corpus.files.count)
    }

    /// Runs `halcyon work --drain` as a child on the bench's database and store.
    private func drainWorker(conninfo: String, store: URL, corpus: BenchCorpus, scratch: URL) async throws -> Subprocess.Usage {
        let log = scratch.appendingPathComponent("worker.log").path
        let pid = try Subprocess.spawn(CommandLine.arguments[0], [
            "work", "--drain", "--database-url", conninfo, "--store", store.path, "--file-root", corpus.directory.path,
            "--concurrency", String(concurrency), "--log-level", "warning", "--worker-id", "halcyon-bench-\(getpid())", "--no-progress",
            "--sweep-interval", "0s",
        ], outputPath: log)
        let usage = await Task.detached { Subprocess.waitWithUsage(pid) }.value
        guard usage.status == 0 else { throw CommandFailure("the worker exited \(usage.status); see \(log)") }
        return usage
    }

    /// L: an idle worker (LISTEN, a 1 s poll as the fallback); `samples` jobs enqueued one at a
    /// time, 50 ms apart; the latency of each is its `started_at - created_at` (one clock: the
    /// database's). Small file jobs with unique keys, so each is claimed and processed.
    private func runLatency(_ corpus: BenchCorpus, conninfo: String, scratch: URL, samples: Int = 40) async throws -> LatencyRun {
        let c = try await PGConnection.connect(conninfo)
        defer { Task { await c.close() } }
        try await c.execute("DELETE FROM halcyon.jobs WHERE cache_key LIKE 'halcyon-bench:%'")
        let tiny = scratch.appendingPathComponent("latency.png")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        try SampleImages.solid(width: 16, height: 16, red: 10, green: 200, blue: 90).write(to: tiny)
        let store = scratch.appendingPathComponent("store-latency-\(getpid())")
        defer { try? FileManager.default.removeItem(at: store) }
        let log = scratch.appendingPathComponent("latency-worker.log").path
        let pid = try Subprocess.spawn(CommandLine.arguments[0], [
            "work", "--database-url", conninfo, "--store", store.path, "--file-root", scratch.path, "--poll-interval", "1s",
            "--log-level", "warning", "--worker-id", "halcyon-bench-latency-\(getpid())", "--sweep-interval", "0s",
        ], outputPath: log)
        do {
            let result = try await measureLatency(c, tiny: tiny, samples: samples, log: log)
            await Self.stop(pid)
            return result
        } catch {
            await Self.stop(pid)
            throw error
        }
    }

    /// S: what claiming and completing cost as the table grows. For 10k and then 1M rows
    /// already in the table (99 % succeeded, 1 % failed, finished a day ago; both × --scale),
    /// 2,000 store-hit jobs (× --scale) are drained by one worker; their jobs/s is compared.
    private func runScale(conninfo: String, scratch: URL) async throws -> [ScaleRun] {
        let c = try await PGConnection.connect(conninfo)
        defer { Task { await c.close() } }
        let tiny = scratch.appendingPathComponent("scale.png")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        try SampleImages.solid(width: 16, height: 16, red: 200, green: 10, blue: 90).write(to: tiny)
        let store = scratch.appendingPathComponent("store-scale-\(getpid())")
        defer { try? FileManager.default.removeItem(at: store) }
        let corpus = BenchCorpus(directory: scratch, files: [], fingerprint: "", summary: "")
        let jobs = max(100, Int(2000 * scale))
        var out: [ScaleRun] = []
        for rows in [10_000, 1_000_000].map({ max(1000, Int(Double($0) * scale)) }) {
            print("S: \(rows) rows in the table…")
            try await c.execute("DELETE FROM halcyon.jobs WHERE cache_key LIKE 'halcyon-bench:%'")
            try await c.execute("""
                INSERT INTO halcyon.jobs (source, processors, cache_key, state, attempt, finished_at, result_key, errors)
                SELECT 'file:///bench/bg-' || g || '.jpg', 'resize(64x64)', 'halcyon-bench:bg-' || g,
                       (CASE WHEN g % 100 = 0 THEN 'failed' ELSE 'succeeded' END)::halcyon.job_state, 1,
                       now() - interval '1 day' + g * interval '1 ms', 'halcyon-bench:bg-' || g || '@resize(64x64,mode=fit)', '[]'
                FROM generate_series(1, $1::int) AS g
                """, [String(rows)])
            // One job stores the result the timed jobs then hit.
            var seed = JobQueue.NewJob(source: "file://" + tiny.path)
            seed.processors = "resize(8x8)"
            seed.cacheKey = "halcyon-bench:scale"
            _ = try await JobQueue(connection: c).enqueue(seed)
            _ = try await drainWorker(conninfo: conninfo, store: store, corpus: corpus, scratch: scratch)
            try await c.execute("DELETE FROM halcyon.jobs WHERE cache_key = 'halcyon-bench:scale'")
            try await c.execute("""
                INSERT INTO halcyon.jobs (source, processors, cache_key)
                SELECT 'file://' || $1, 'resize(8x8)', 'halcyon-bench:scale' FROM generate_series(1, $2::int)
                """, [tiny.path, String(jobs)])
            try await c.execute("ANALYZE halcyon.jobs")
            let started = Date()
            _ = try await drainWorker(conninfo: conninfo, store: store, corpus: corpus, scratch: scratch)
            let seconds = Date().timeIntervalSince(started)
            let done = try await c.execute("SELECT count(*) AS n FROM halcyon.jobs WHERE cache_key = 'halcyon-bench:scale' AND cache_hit")
                .value(0, "n").flatMap { Int($0) } ?? 0
            guard done == jobs else { throw CommandFailure("S: only \(done) of \(jobs) jobs were store hits") }
            let run = ScaleRun(rows: rows, jobs: jobs, seconds: seconds)
            print("S: \(run.line)")
            out.append(run)
        }
        try await c.execute("DELETE FROM halcyon.jobs WHERE cache_key LIKE 'halcyon-bench:%'")
        return out
    }

    /// SIGTERM, and the exit waited for off the cooperative pool.
    private static func stop(_ pid: pid_t) async {
        kill(pid, SIGTERM)
        _ = await Task.detached { Subprocess.waitWithUsage(pid) }.value
    }

    private func measureLatency(_ c: PGConnection, tiny: URL, samples: Int, log: String) async throws -> LatencyRun {
        try await Task.sleep(for: .seconds(1))  // let it start and LISTEN
        let queue = JobQueue(connection: c)
        let run = UUID().uuidString.prefix(8)
        for i in 0..<samples {
            var j = JobQueue.NewJob(source: "file://" + tiny.path)
            j.processors = "resize(8x8)"
            j.cacheKey = "halcyon-bench:latency-\(run)-\(i)"
            _ = try await queue.enqueue(j)
            try await Task.sleep(for: .milliseconds(50))
        }
        let deadline = Date().addingTimeInterval(30)
        var rows: [Double] = []
        while Date() < deadline {
            rows = try await c.execute("""
                SELECT extract(epoch FROM started_at - created_at)::float8 * 1000 AS ms FROM halcyon.jobs
                WHERE cache_key LIKE 'halcyon-bench:latency-\(run)-%' AND started_at IS NOT NULL
                """).rows.compactMap { $0[0].flatMap { Double($0) } }
            if rows.count == samples { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        guard rows.count == samples else { throw CommandFailure("L: only \(rows.count) of \(samples) jobs started; see \(log)") }
        return LatencyRun(milliseconds: rows)
    }

    /// `scripts/bench-pillow.py`, when python3 has Pillow.
    static func pillowScript() -> String? {
        guard let dir = ResourceLocator.find("scripts", marker: "bench-pillow.py", environment: "HALCYON_SCRIPTS").found else { return nil }
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("pillow-check-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        guard (try? Subprocess.run("/usr/bin/env", ["python3", "-c", "import PIL"], outputPath: out)) == 0 else { return nil }
        return dir.appendingPathComponent("bench-pillow.py").path
    }

    /// Pillow with draft() in `--concurrency` long-lived processes (the strongest peer
    /// FIELD-NOTES.md measured). CPU covers the pool's processes; peak RSS is the parent's.
    private func runPillow(_ script: String, _ corpus: BenchCorpus, scratch: URL) async throws -> BenchRun {
        let outDir = scratch.appendingPathComponent("pillow")
        try? FileManager.default.removeItem(at: outDir)
        try FileManager.default.createDirectory(at: outDir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: outDir) }
        let started = Date()
        let pid = try Subprocess.spawn("/usr/bin/env", ["python3", script, outDir.path, String(concurrency)] + corpus.files.map(\.path),
                                       outputPath: scratch.appendingPathComponent("pillow.log").path)
        let usage = await Task.detached { Subprocess.waitWithUsage(pid) }.value
        let seconds = Date().timeIntervalSince(started)
        let made = (try? FileManager.default.contentsOfDirectory(atPath: outDir.path).filter { $0.hasSuffix(".jpg") }.count) ?? 0
        guard usage.status == 0, made == corpus.files.count else { throw CommandFailure("Pillow produced \(made) of \(corpus.files.count) outputs") }
        return BenchRun(seconds: seconds, cpuSeconds: usage.cpuSeconds, peakRSS: usage.peakRSS, images: corpus.files.count)
    }

    /// A real ImageMagick `convert` (some machines put a stand-in first on PATH).
    static func realConvert() -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for candidate in ["/usr/bin/convert"] + path.split(separator: ":").map({ "\($0)/convert" })
        where FileManager.default.isExecutableFile(atPath: candidate) {
            let out = FileManager.default.temporaryDirectory.appendingPathComponent("convert-version-\(getpid())").path
            defer { try? FileManager.default.removeItem(atPath: out) }
            if (try? Subprocess.run(candidate, ["-version"], outputPath: out)) == 0,
               let text = FileManager.default.contents(atPath: out), String(decoding: text, as: UTF8.self).hasPrefix("Version: ImageMagick") {
                return candidate
            }
        }
        return nil
    }

    private func runConvert(_ convert: String, _ corpus: BenchCorpus, tuned: Bool, scratch: URL) throws -> BenchRun {
        let outDir = scratch.appendingPathComponent("convert-\(tuned ? "tuned" : "naive")")
        try? FileManager.default.removeItem(at: outDir)
        try FileManager.default.createDirectory(at: outDir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: outDir) }
        var environment = ProcessInfo.processInfo.environment
        if tuned { environment["MAGICK_THREAD_LIMIT"] = "1" }
        let env = environment
        let files = corpus.files
        let next = Counter(), usages = UsageBox()
        let started = Date()
        DispatchQueue.concurrentPerform(iterations: concurrency) { _ in
            while let i = next.take(below: files.count) {
                let f = files[i]
                var args: [String] = []
                if tuned, f.path.hasSuffix(".jpg") {
                    // The smallest decode that still covers 320×320 (what libjpeg may scale to).
                    let k = max(320 / Double(f.width), 320 / Double(f.height))
                    args += ["-define", "jpeg:size=\(Int((Double(f.width) * k).rounded(.up)))x\(Int((Double(f.height) * k).rounded(.up)))"]
                }
                args += [f.path, "-resize", "320x320^", "-gravity", "center", "-extent", "320x320", "-quality", "82",
                         outDir.appendingPathComponent("\(i).jpg").path]
                let log = outDir.appendingPathComponent("\(i).log").path
                if let pid = try? Subprocess.spawn(convert, args, outputPath: log, environment: env) {
                    usages.add(Subprocess.waitWithUsage(pid))
                }
            }
        }
        let seconds = Date().timeIntervalSince(started)
        let made = (try? FileManager.default.contentsOfDirectory(atPath: outDir.path).filter { $0.hasSuffix(".jpg") }.count) ?? 0
        guard made == files.count, usages.failures == 0 else { throw CommandFailure("convert produced \(made) of \(files.count) outputs") }
        return BenchRun(seconds: seconds, cpuSeconds: usages.cpu, peakRSS: usages.peak, images: files.count)
    }
}

/// Hands out indices to the peer pool.
private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func take(below n: Int) -> Int? {
        lock.lock(); defer { lock.unlock() }
        guard value < n else { return nil }
        value += 1
        return value - 1
    }
}

/// Sums the peers' CPU and keeps their peak RSS.
private final class UsageBox: @unchecked Sendable {
    private let lock = NSLock()
    private(set) var cpu = 0.0, peak = 0, failures = 0
    func add(_ u: Subprocess.Usage) {
        lock.lock(); defer { lock.unlock() }
        cpu += u.cpuSeconds
        peak = max(peak, u.peakRSS)
        if u.status != 0 { failures += 1 }
    }
}
