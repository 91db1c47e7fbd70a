import ArgumentParser
import HalcyonCLI
import Dispatch
import Foundation
import HalcyonCore
import HalcyonImage
import HalcyonQueue
import HalcyonStore
import HalcyonSamples
import HalcyonEmbedded

package struct Bench: AsyncParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        abstract: "Measure W1, W2, H, L and S end to end through the queue, beside Pillow, vipsthumbnail and convert on the same files.",
        discussion: """
            W1: every corpus image → resize(320x320, mode=fill) |> format(jpeg, quality=82). The \
            corpus is generated (seeded, photo-like) under $HALCYON_HOME/bench/corpus: by default \
            100 × 1920×1080 JPEG q85, 30 × 4032×3024 JPEG q90 and 20 × 1200×800 PNG with alpha; \
            --scale shrinks the counts for quick runs. Halcyon runs as a `halcyon work --drain` \
            child (real queue, file:// sources, real store); its peak RSS and CPU come from wait4 \
            and /proc. Peers, each when installed (scripts/bench-peers-setup), else skipped with a \
            note: Pillow with draft() in --concurrency long-lived processes \
            (scripts/bench-pillow.py); vipsthumbnail in --concurrency batches; convert naive \
            (-resize WxH^ -gravity center -extent WxH) and tuned (-define jpeg:size as the shrink \
            allows, one thread), one process per image, --concurrency at a time.

            W2: every source → three variants (the W1 chain, a 1024 fit WebP q80, a 64 fill PNG), \
            beside Pillow and tuned convert decoding once per source.

            H: the W1 jobs again, copied to about 5,000, on the store W1 filled: store-hit jobs/s.

            L: an idle worker; 40 small jobs enqueued 50 ms apart; enqueue→start p50/p95/p99.

            S: 2,000 store-hit jobs drained with 10k and then 1M finished rows in the table (both \
            × --scale): the cost per job of the large table against the small one. \
            Quality guard: two images of each kind are made by full decode + ImageMagick's Lanczos; \
            every tool's W1 output is scored by PSNR against them, and Halcyon must be within \
            0.5 dB of the best convert peer (else the bench fails). \
            Writes a table per scenario, JSON (--out, default $HALCYON_HOME/bench/results.json) \
            and a PNG chart beside it. \
            On the embedded database the bench uses its own database, halcyon_bench; a database \
            given with --database-url must hold no jobs but the bench's (it refuses otherwise).
            """)

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Scale the corpus counts (1 = 100 + 30 + 20 images).")
    var scale: Double = 1
    @Option(name: .customLong("repeat"), help: "Runs per tool; medians are reported.")
    var repeats: Int = 3
    @Option(help: "Processing slots for Halcyon and parallel processes for the peers. Default: cores.")
    var concurrency: Int = ProcessInfo.processInfo.activeProcessorCount
    @Flag(help: "Skip the peers (Pillow, vipsthumbnail, convert).")
    var noPeers = false
    @Flag(help: "Skip S (claim+complete cost with 10k against 1M rows in the table; inserting them takes a minute).")
    var noScale = false
    @Option(help: "Write the results as JSON here (default $HALCYON_HOME/bench/results.json).")
    var out: String?

    static let chain = "resize(320x320, mode=fill) |> format(jpeg, quality=82)"
    /// W2: three variants of every source (decoded once when the three share a claim).
    static let variants = [chain, "resize(1024x1024, mode=fit) |> format(webp, quality=80)", "resize(64x64, mode=fill) |> format(png)"]

    package func validate() throws {
        guard scale > 0, scale <= 10 else { throw ValidationError("--scale must be in (0, 10]") }
        guard (1...20).contains(repeats) else { throw ValidationError("--repeat must be 1…20") }
        guard (1...256).contains(concurrency) else { throw ValidationError("--concurrency must be 1…256") }
    }

    package func run() async throws {
        let home = EmbeddedCluster.defaultHome().appendingPathComponent("bench")
        let scratch = home.appendingPathComponent("scratch")
        let corpus = try BenchCorpus.ensure(in: home.appendingPathComponent("corpus"), scale: scale)
        print("corpus: \(corpus.summary), fingerprint \(corpus.fingerprint.prefix(16))")
        let quality = try await Blocking.run { try BenchQuality.make(corpus) }  // full decodes of 12 MP images
        let peers = BenchPeers(concurrency: concurrency, corpus: corpus, scratch: scratch, quality: quality)
        let convert = noPeers ? nil : BenchPeers.convert(), vips = noPeers ? nil : BenchPeers.vipsthumbnail()
        let pillow = noPeers ? nil : BenchPeers.pillowScript()
        if !noPeers {
            if convert == nil { print("peer skipped: no real ImageMagick `convert` (run scripts/bench-peers-setup)") }
            if vips == nil { print("peer skipped: no vipsthumbnail (run scripts/bench-peers-setup)") }
            if pillow == nil { print("peer skipped: no Pillow for python3, or scripts/bench-pillow.py not found (run scripts/bench-peers-setup)") }
        }

        let conninfo = try await benchDatabase()
        var w1: [String: [BenchRun]] = [:], w2: [String: [BenchRun]] = [:]
        var hitRuns: [HitRun] = []
        var latencyRuns: [LatencyRun] = []
        for round in 1...repeats {
            func report(_ scenario: String, _ tool: String, _ run: BenchRun) {
                print("round \(round): \(scenario) \(tool) \(scenario == "W2" ? run.line.replacingOccurrences(of: "image", with: "source") : run.line)")
            }
            let (h, hits) = try await runHalcyon(corpus, conninfo: conninfo, scratch: scratch, quality: quality)
            w1["halcyon", default: []].append(h)
            hitRuns.append(hits)
            report("W1", "halcyon", h)
            print("round \(round): H \(hits.line)")
            let hw2 = try await runW2(corpus, conninfo: conninfo, scratch: scratch)
            w2["halcyon", default: []].append(hw2)
            report("W2", "halcyon", hw2)
            let latency = try await runLatency(corpus, conninfo: conninfo, scratch: scratch)
            latencyRuns.append(latency)
            print("round \(round): L \(latency.line)")
            if let pillow {
                for (scenario, label) in [(BenchPeers.Scenario.w1, "W1"), (.w2, "W2")] {
                    let r = try await peers.pillow(pillow, scenario)
                    scenario == .w1 ? w1["pillow draft", default: []].append(r) : w2["pillow draft", default: []].append(r)
                    report(label, "pillow draft", r)
                }
            }
            if let vips {
                let r = try await peers.vips(vips)
                w1["vipsthumbnail", default: []].append(r)
                report("W1", "vipsthumbnail", r)
            }
            if let convert {
                for (tuned, scenario) in [(true, BenchPeers.Scenario.w1), (false, .w1), (true, .w2)] {
                    let tool = tuned ? "convert tuned" : "convert naive"
                    let r = try await peers.convert(convert, tuned: tuned, scenario)
                    scenario == .w1 ? w1[tool, default: []].append(r) : w2[tool, default: []].append(r)
                    report(scenario == .w1 ? "W1" : "W2", tool, r)
                }
            }
        }
        let order = ["halcyon", "pillow draft", "vipsthumbnail", "convert tuned", "convert naive"]
        let results = order.compactMap { t in w1[t].map { BenchResult(tool: t, runs: $0) } }
        let w2Results = order.compactMap { t in w2[t].map { BenchResult(tool: t, runs: $0) } }
        let scaleRuns = noScale ? [] : try await runScale(conninfo: conninfo, scratch: scratch)
        let effects = try await runEffects(corpus)
        print(BenchResult.table("W1 — \(Self.chain)", results, unit: "image", count: corpus.files.count, concurrency: concurrency, repeats: repeats))
        print(BenchResult.table("W2 — three variants per source: " + Self.variants.joined(separator: "; "), w2Results, unit: "source",
                                count: corpus.files.count, concurrency: concurrency, repeats: repeats))
        let verdict = BenchQuality.verdict(results)
        if let verdict { print(verdict.line + "\n") }
        print(HitRun.summary(hitRuns))
        print(LatencyRun.summary(latencyRuns))
        if !scaleRuns.isEmpty { print(ScaleRun.summary(scaleRuns)) }
        print(Self.effectsTable(effects))

        var json = BenchResult.json(results, corpus: corpus, concurrency: concurrency, chain: Self.chain,
                                    versions: BenchPeers.versions(convert: convert, vips: vips, pillow: pillow))
        if case .object(var o) = json {
            o["H"] = HitRun.json(hitRuns)
            o["L"] = LatencyRun.json(latencyRuns)
            o["W2"] = ["chains": .array(Self.variants.map { .string($0) }), "results": .array(w2Results.map { $0.json(unit: "source") })]
            if let verdict { o["quality_guard"] = ["passed": .bool(verdict.passed), "tolerance_db": .number(BenchQuality.tolerance), "samples": .number(Double(quality.samples.count))] }
            if !scaleRuns.isEmpty { o["S"] = ScaleRun.json(scaleRuns) }
            o["E"] = .array(effects.rows.map { ["step": .string($0.step), "halcyon_ms": .number(($0.halcyonMs * 10).rounded() / 10),
                                           "two_dimensional_ms": .number(($0.twoDimensionalMs * 10).rounded() / 10),
                                           "psnr_db": .number(($0.psnr * 100).rounded() / 100)] })
            json = .object(o)
        }
        let outURL = URL(fileURLWithPath: out ?? home.appendingPathComponent("results.json").path)
        try Data(json.prettyText.utf8).write(to: outURL)
        print("results: \(outURL.path)")
        let chartURL = outURL.deletingPathExtension().appendingPathExtension("png")
        try BenchChart.make(w1: results, w2: w2Results, hits: hitRuns, corpus: corpus, concurrency: concurrency, repeats: repeats).write(to: chartURL)
        print("chart: \(chartURL.path)")
        if let verdict, !verdict.passed { throw CommandFailure("quality guard failed: Halcyon's outputs are more than \(BenchQuality.tolerance) dB below ImageMagick's") }
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

    /// A stage's milliseconds from a job's `timings` (0 when it did not run).
    static func stage(_ name: String) -> String { "coalesce((timings->>'\(name)_ms')::float8, 0)" }
    /// What a job's image cost: its stages' sum, without its wait for a processing slot.
    static let stageSum = ["fetch", "decode", "process", "encode", "store"].map(stage).joined(separator: " + ")

    /// W1, then H on the store W1 just filled.
    private func runHalcyon(_ corpus: BenchCorpus, conninfo: String, scratch: URL, quality: BenchQuality) async throws -> (w1: BenchRun, hits: HitRun) {
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
        // Per-image times (the stages' sum: what the image cost, not its wait for a slot) and
        // the quality sample's outputs.
        var ms: [Double] = [], paths: [String: String] = [:]
        for row in try await c.execute("SELECT cache_key, result_path, \(Self.stageSum) AS ms FROM halcyon.jobs").rows {
            if let v = row[2].flatMap({ Double($0) }) { ms.append(v) }
            if let key = row[0], let path = row[1] { paths[String(key.dropFirst("halcyon-bench:".count))] = store.appendingPathComponent(path).path }
        }
        let w1 = BenchRun(seconds: seconds, cpuSeconds: usage.cpuSeconds, peakRSS: usage.peakRSS, images: corpus.files.count, perImageMs: ms,
                          psnr: quality.score { paths[URL(fileURLWithPath: corpus.files[$0].path).lastPathComponent] })

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
        // A source's three jobs share its fetch and decode; each adds its own processing.
        let ms = try await c.execute("""
            SELECT max(\(Self.stage("fetch")) + \(Self.stage("decode"))) + sum(\(Self.stage("process")) + \(Self.stage("encode")) + \(Self.stage("store"))) AS ms
            FROM halcyon.jobs WHERE cache_key LIKE 'halcyon-bench:w2-%' GROUP BY source
            """).rows.compactMap { $0[0].flatMap { Double($0) } }
        return BenchRun(seconds: seconds, cpuSeconds: usage.cpuSeconds, peakRSS: usage.peakRSS, images: corpus.files.count, perImageMs: ms)
    }

    /// Runs `halcyon work --drain` as a child on the bench's database and store.
    private func drainWorker(conninfo: String, store: URL, corpus: BenchCorpus, scratch: URL) async throws -> Subprocess.Usage {
        let log = scratch.appendingPathComponent("worker.log").path
        let pid = try Subprocess.spawn(CommandLine.arguments[0], [
            "work", "--drain", "--database-url", conninfo, "--store", store.path, "--file-root", corpus.directory.path,
            "--concurrency", String(concurrency), "--log-level", "warning", "--worker-id", "halcyon-bench-\(getpid())", "--no-progress",
            "--sweep-interval", "0s",
        ], outputPath: log)
        let usage = try await Blocking.run { Subprocess.waitWithUsage(pid) }
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

    /// E: `blur` and `sharpen` on the first 1920×1080 corpus JPEG (scaled to 480 px wide below
    /// --scale 0.5, for quick runs), as Halcyon runs them (the separable Gaussian) against
    /// ImageMagick's 2-D kernels, in-process, one thread each.
    private func runEffects(_ corpus: BenchCorpus) async throws -> (size: ImageSize, rows: [EffectBench.Row]) {
        guard let file = corpus.files.first(where: { $0.width == 1920 && $0.path.hasSuffix(".jpg") }),
              let data = FileManager.default.contents(atPath: file.path) else { return (ImageSize(width: 0, height: 0), []) }
        let repeats = self.repeats, maxWidth = scale < 0.5 ? 480 : 1920
        return try await Blocking.run { try EffectBench.measure(data, format: .jpeg, maxWidth: maxWidth, repeats: repeats) }
    }

    static func effectsTable(_ effects: (size: ImageSize, rows: [EffectBench.Row])) -> String {
        guard !effects.rows.isEmpty else { return "" }
        let rows = effects.rows
        var out = "E — effects on a \(effects.size) JPEG, one thread (median of the runs): Halcyon against ImageMagick's 2-D kernel\n"
        out += "  step          halcyon ms   2-D kernel ms   speed-up   PSNR between them\n"
        for r in rows {
            out += "  " + r.step.padding(toLength: 12, withPad: " ", startingAt: 0)
                + String(format: " %10.1f %15.1f %9.1f× %12.1f dB\n", r.halcyonMs, r.twoDimensionalMs, r.twoDimensionalMs / max(r.halcyonMs, 0.001), r.psnr)
        }
        return out
    }

    /// SIGTERM, and the exit waited for off the cooperative pool.
    private static func stop(_ pid: pid_t) async {
        kill(pid, SIGTERM)
        _ = try? await Blocking.run { Subprocess.waitWithUsage(pid) }
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
}
