import ArgumentParser
import Dispatch
import Foundation
import HalcyonCLI
import HalcyonChain
import HalcyonDomain
import HalcyonEmbedded
import HalcyonImage
import HalcyonQueue
import HalcyonRuntime
import HalcyonS3
import HalcyonSamples
import HalcyonStore
import Logging
import Synchronization

/// The scenarios `halcyon bench` runs: W1 and H, W2, L, S and E.
extension Bench {
    /// W1, then H on the store W1 just filled.
    /// `options` go on every W1 job; `hits: false` skips H; `bucket` (`s3://…`, a prefix of the
    /// run's own) puts the store there instead of a directory, and is emptied after.
    func runHalcyon(
        _ corpus: BenchCorpus, conninfo: String, scratch: URL, quality: BenchQuality, options: String = "{}", hits measureHits: Bool = true,
        bucket: String? = nil, environment: [String: String] = [:]
    ) async throws -> (w1: BenchRun, hits: HitRun?) {
        try await Self.emptyingAfter(bucket) {
            try await measureHalcyon(
                corpus, conninfo: conninfo, scratch: scratch, quality: quality, options: options, hits: measureHits, bucket: bucket,
                environment: environment)
        }
    }

    private func measureHalcyon(
        _ corpus: BenchCorpus, conninfo: String, scratch: URL, quality: BenchQuality, options: String, hits measureHits: Bool, bucket: String?,
        environment: [String: String]
    ) async throws -> (w1: BenchRun, hits: HitRun?) {
        let c = try await PGConnection.connect(conninfo)
        try await Self.ensureOnlyBenchJobs(c)
        try await c.run(BenchSQL.DeleteBenchJobs())
        try await c.run(BenchSQL.DeleteBenchWorkers())
        _ = try await JobQueue(connection: c).enqueue(
            batch: corpus.files.map { f in
                var j = JobQueue.NewJob(source: "file://" + f.path)
                j.processors = Self.chain
                j.options = options
                j.cacheKey = "halcyon-bench:" + URL(fileURLWithPath: f.path).lastPathComponent
                return j
            })
        let directory = scratch.appendingPathComponent("store-\(getpid())")
        let store = bucket ?? directory.path
        try? FileManager.default.removeItem(at: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        let started = Date()
        let progress = ProgressReporter(conninfo: conninfo, label: "images", expected: corpus.files.count, since: started)
        let cpuBefore = MachineCPU.now()
        let database = DatabaseCPU(conninfo: conninfo)
        let usage = try await drainWorker(conninfo: conninfo, store: store, corpus: corpus, scratch: scratch, environment: environment)
        let seconds = Date().timeIntervalSince(started)  // before the reporter's last tick
        let machine = MachineCPU.now().flatMap { cpuBefore?.shares(until: $0) }
        let databaseSeconds = await database.spent()
        await progress.finish()
        let ok = try await c.row(BenchSQL.W1Outputs())?.ok ?? 0
        guard ok == corpus.files.count else { throw CommandFailure("only \(ok) of \(corpus.files.count) outputs are 320×320 JPEGs") }
        // Per-image times (the stages' sum: what the image cost, not its wait for a slot) and
        // the quality sample's outputs.
        var ms: [Double] = [], paths: [String: String] = [:]
        for row in try await c.rows(BenchSQL.W1Images()) {
            if let v = row.ms { ms.append(v) }
            // The quality guard reads outputs from disk: a bucket's are not scored.
            if bucket == nil, let key = row.cacheKey, let path = row.resultPath {
                paths[String(key.dropFirst("halcyon-bench:".count))] = directory.appendingPathComponent(path).path
            }
        }
        let w1 = BenchRun(
            seconds: seconds, cpuSeconds: usage.cpuSeconds, peakRSS: usage.peakRSS, images: corpus.files.count, perImageMs: ms,
            psnr: quality.score { paths[URL(fileURLWithPath: corpus.files[$0].path).lastPathComponent] },
            stages: try await Self.stageMeans(c, perSource: false), machine: machine, databaseCPUSeconds: databaseSeconds)

        guard measureHits else {
            await c.close()
            return (w1, nil)
        }
        // H: the same jobs again, copied to about 5,000, on the store W1 filled — every one a hit.
        let copies = max(1, 5000 / corpus.files.count)
        try await c.run(BenchSQL.CopyForHits(copies: copies))
        try await c.run(BenchSQL.DeleteSucceeded())
        let hitJobs = corpus.files.count * copies
        let hitStarted = Date()
        let hitUsage = try await drainWorker(conninfo: conninfo, store: store, corpus: corpus, scratch: scratch)
        let hitSeconds = Date().timeIntervalSince(hitStarted)
        let r = try await c.row(BenchSQL.HitDrain())
        await c.close()
        let hits = r?.hits ?? 0
        guard hits == hitJobs, let drain = r?.drain, drain > 0 else {
            throw CommandFailure("H: only \(hits) of \(hitJobs) jobs were store hits")
        }
        return (w1, HitRun(jobs: hitJobs, seconds: drain, cpuSeconds: hitUsage.cpuSeconds, processSeconds: hitSeconds))
    }

    /// What W2's or W3's outputs must be (bench.sql's `w2Outputs`, `w3Outputs`).
    enum VariantCheck: Sendable { case w2, w3 }

    /// W2 (and W3): every source → each of `chains`, enqueued together so a claim holds a
    /// source's jobs and decodes it once. Every output is checked as `expected` says.
    func runVariants(
        _ corpus: BenchCorpus, chains: [String], label: String, expected: VariantCheck, conninfo: String, scratch: URL
    ) async throws -> BenchRun {
        let c = try await PGConnection.connect(conninfo)
        defer { Task { await c.close() } }
        try await c.run(BenchSQL.DeleteBenchJobs())
        let prefix = "halcyon-bench:\(label.lowercased())-"
        _ = try await JobQueue(connection: c).enqueue(
            batch: corpus.files.flatMap { f in
                chains.map { chain in
                    var j = JobQueue.NewJob(source: "file://" + f.path)
                    j.processors = chain
                    j.cacheKey = prefix + URL(fileURLWithPath: f.path).lastPathComponent
                    return j
                }
            })
        let store = scratch.appendingPathComponent("store-\(label.lowercased())-\(getpid())")
        try? FileManager.default.removeItem(at: store)
        defer { try? FileManager.default.removeItem(at: store) }
        let started = Date()
        let cpuBefore = MachineCPU.now()
        let database = DatabaseCPU(conninfo: conninfo)
        let usage = try await drainWorker(conninfo: conninfo, store: store, corpus: corpus, scratch: scratch)
        let seconds = Date().timeIntervalSince(started)
        let machine = MachineCPU.now().flatMap { cpuBefore?.shares(until: $0) }
        let databaseSeconds = await database.spent()
        let ok =
            switch expected {
            case .w2: try await c.row(BenchSQL.W2Outputs(keyPattern: prefix + "%"))?.ok ?? 0
            case .w3: try await c.row(BenchSQL.W3Outputs(keyPattern: prefix + "%"))?.ok ?? 0
            }
        let want = corpus.files.count * chains.count
        guard ok == want else { throw CommandFailure("\(label): only \(ok) of \(want) outputs are as asked") }
        // A source's jobs share its fetch and decode; each adds its own processing.
        let ms = try await c.rows(BenchSQL.SourceCosts(keyPattern: prefix + "%")).map(\.ms)
        return BenchRun(
            seconds: seconds, cpuSeconds: usage.cpuSeconds, peakRSS: usage.peakRSS, images: corpus.files.count, perImageMs: ms,
            stages: try await Self.stageMeans(c, perSource: true), machine: machine, databaseCPUSeconds: databaseSeconds)
    }

    /// The stages whose CPU time a job records (`decode_cpu_ms` …).
    static let stageNames = ["decode", "process", "encode", "store"]

    /// Mean CPU milliseconds per image (or per source: its jobs' shares of its one decode, and
    /// their own processing, added up) in each stage, over the bench's jobs.
    static func stageMeans(_ c: PGConnection, perSource: Bool) async throws -> [(name: String, ms: Double)] {
        let row = perSource ? try await c.row(BenchSQL.StageCPUPerSource()) : try await c.row(BenchSQL.StageCPUPerImage())
        return row?.means ?? stageNames.map { ($0, 0) }
    }

    /// Runs `body`, then empties the bucket prefix `location` (a run's own; nil: nothing to
    /// empty) however `body` ended — on a blocking thread, not the cooperative pool.
    static func emptyingAfter<T: Sendable>(_ location: String?, _ body: () async throws -> T) async throws -> T {
        guard let location else { return try await body() }
        let result: Result<T, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        await empty(location)
        return try result.get()
    }

    /// Deletes everything under the bucket prefix `location` (a bench run's), page by page.
    static func empty(_ location: String) async {
        guard case .objectStore(let configuration)? = try? StoreLocation(parsing: location), let client = try? S3Client(configuration: configuration)
        else { return }
        // A page at a time; a page that deletes nothing (no permission) ends it.
        for _ in 0..<10_000 {
            guard let page = try? await client.list(), !page.entries.isEmpty else { return }
            var deleted = 0
            for entry in page.entries where (try? await client.delete(entry.key)) != nil { deleted += 1 }
            if deleted == 0 { return }
        }
    }

    /// Runs `halcyon work --drain` as a child on the bench's database and store.
    func drainWorker(conninfo: String, store: URL, corpus: BenchCorpus, scratch: URL) async throws -> Subprocess.Usage {
        try await drainWorker(conninfo: conninfo, store: store.path, corpus: corpus, scratch: scratch)
    }

    /// The same with `store` a directory or `s3://…`, and `environment` over the bench's own variables.
    func drainWorker(
        conninfo: String, store: String, corpus: BenchCorpus, scratch: URL, environment: [String: String] = [:]
    ) async throws -> Subprocess.Usage {
        let log = scratch.appendingPathComponent("worker.log").path
        let pid = try Subprocess.spawn(
            workerExecutable,
            [
                "work", "--drain", "--database-url", conninfo, "--store", store, "--file-root", corpus.directory.path,
                "--log-level", "warning", "--worker-id", "halcyon-bench-\(getpid())", "--no-progress",
                "--sweep-interval", "0s",
            ] + (workerConcurrency.map { ["--concurrency", String($0)] } ?? []), outputPath: log,
            environment: environment.isEmpty ? nil : ProcessInfo.processInfo.environment.merging(environment) { $1 })
        let usage = try await Blocking.run { Subprocess.waitWithUsage(pid) }
        guard usage.status == 0 else { throw CommandFailure("the worker exited \(usage.status); see \(log)") }
        return usage
    }

    /// L: an idle worker (LISTEN, a 1 s poll as the fallback); `samples` jobs enqueued one at a
    /// time, 50 ms apart; the latency of each is its `started_at - created_at` (one clock: the
    /// database's). Small file jobs with unique keys, so each is claimed and processed. Then the
    /// same again (store hits); for both, enqueue → `halcyon_job_finished` as a listener sees it.
    func runLatency(_ corpus: BenchCorpus, conninfo: String, scratch: URL, samples: Int = 40) async throws -> LatencyRun {
        let c = try await PGConnection.connect(conninfo)
        defer { Task { await c.close() } }
        try await c.run(BenchSQL.DeleteBenchJobs())
        let tiny = scratch.appendingPathComponent("latency.png")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        try SampleImages.solid(width: 16, height: 16, red: 10, green: 200, blue: 90).write(to: tiny)
        let store = scratch.appendingPathComponent("store-latency-\(getpid())")
        defer { try? FileManager.default.removeItem(at: store) }
        let log = scratch.appendingPathComponent("latency-worker.log").path
        let pid = try Subprocess.spawn(
            workerExecutable,
            [
                "work", "--database-url", conninfo, "--store", store.path, "--file-root", scratch.path, "--poll-interval", "1s",
                "--log-level", "warning", "--worker-id", "halcyon-bench-latency-\(getpid())", "--sweep-interval", "0s",
            ], outputPath: log)
        do {
            let result = try await measureLatency(c, tiny: tiny, samples: samples, log: log, conninfo: conninfo)
            await Self.stop(pid)
            return result
        } catch {
            await Self.stop(pid)
            throw error
        }
    }

    /// E: `blur` and `sharpen` on the first 1920×1080 corpus JPEG (scaled to 480 px wide below
    /// --scale 0.5, for quick runs), as Halcyon runs them (the separable Gaussian) against
    /// ImageMagick's 2-D kernels, in-process, one thread each.
    func runEffects(_ corpus: BenchCorpus) async throws -> (size: ImageSize, rows: [EffectBench.Row]) {
        guard let file = corpus.files.first(where: { $0.width == 1920 && $0.path.hasSuffix(".jpg") }),
            let data = FileManager.default.contents(atPath: file.path)
        else { return (ImageSize(width: 0, height: 0), []) }
        let repeats = self.repeats, maxWidth = scale < 0.5 ? 480 : 1920
        return try await Blocking.run { try EffectBench.measure(data, format: .jpeg, maxWidth: maxWidth, repeats: repeats) }
    }

    /// E, second part: smart crops and placeholders per image (`FrontEndBench`), on up to 20
    /// of the corpus's 1920×1080 JPEGs.
    func runFrontEnd(_ corpus: BenchCorpus) async throws -> [FrontEndBench.Row] {
        let sources = corpus.files.filter { $0.width == 1920 && $0.path.hasSuffix(".jpg") }.prefix(20).compactMap {
            FileManager.default.contents(atPath: $0.path)
        }
        guard !sources.isEmpty else { return [] }
        return try await Blocking.run { try FrontEndBench.measure(Array(sources)) }
    }

    static func frontEndTable(_ rows: [FrontEndBench.Row]) -> String {
        guard let base = rows.first?.cpuMs, let w1 = rows.first(where: { $0.what == "W1 chain" })?.cpuMs else { return "" }
        var out = "E — front-end steps on 1920×1080 JPEGs, one thread, CPU ms per image (decode to encode)\n"
        for r in rows {
            let against = r.what.hasPrefix("W1") ? w1 : base
            out +=
                "  " + r.what.padding(toLength: 50, withPad: " ", startingAt: 0)
                + String(format: " %7.1f ms  %+6.1f ms\n", r.cpuMs, r.cpuMs - against)
        }
        return out
    }

    static func effectsTable(_ effects: (size: ImageSize, rows: [EffectBench.Row])) -> String {
        guard !effects.rows.isEmpty else { return "" }
        let rows = effects.rows
        var out = "E — effects on a \(effects.size) JPEG, one thread (median of the runs): Halcyon against ImageMagick's 2-D kernel\n"
        out += "  step          halcyon ms   2-D kernel ms   speed-up   PSNR between them\n"
        for r in rows {
            out +=
                "  " + r.step.padding(toLength: 12, withPad: " ", startingAt: 0)
                + String(
                    format: " %10.1f %15.1f %9.1f× %12.1f dB\n", r.halcyonMs, r.twoDimensionalMs, r.twoDimensionalMs / max(r.halcyonMs, 0.001), r.psnr
                )
        }
        return out
    }

    /// The bench's workers take whatever is queued, so it only runs on a database that holds
    /// nothing but its own jobs, and it deletes only those.
    static func ensureOnlyBenchJobs(_ c: PGConnection) async throws {
        guard try await c.row(BenchSQL.ForeignJobs())?.n == 0 else {
            throw CommandFailure(
                "this database holds jobs that are not the bench's; run the bench on the embedded default or an empty database of its own")
        }
    }

    /// SIGTERM, and the exit waited for off the cooperative pool.
    static func stop(_ pid: pid_t) async {
        kill(pid, SIGTERM)
        _ = try? await Blocking.run { Subprocess.waitWithUsage(pid) }
    }

    func measureLatency(_ c: PGConnection, tiny: URL, samples: Int, log: String, conninfo: String) async throws -> LatencyRun {
        // enqueue → halcyon_job_finished, on the bench's clock: a listener of its own.
        let arrivals = Arrivals()
        let listener = JobListener(conninfo: conninfo, channel: JobListener.finishedChannel, logger: Logger(label: "halcyon.bench")) { payloads in
            let now = ContinuousClock.now
            arrivals.times.withLock { t in
                for p in payloads { if let id = JobWaiter.jobID(inPayload: p) { t[id] = now } }
            }
        }
        listener.start()
        defer { listener.stop() }
        try await Task.sleep(for: .seconds(1))  // let the worker start and both LISTEN
        let queue = JobQueue(connection: c)
        let run = UUID().uuidString.prefix(8)
        // Misses first (each key new), then the same keys again: store hits.
        var sent: [(id: Int64, at: ContinuousClock.Instant, hit: Bool)] = []
        for pass in [false, true] {
            for i in 0..<samples {
                var j = JobQueue.NewJob(source: "file://" + tiny.path)
                j.processors = "resize(8x8)"
                j.cacheKey = "halcyon-bench:latency-\(run)-\(i)"
                let at = ContinuousClock.now
                sent.append((try await queue.enqueue(j).id, at, pass))
                try await Task.sleep(for: .milliseconds(50))
            }
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline, arrivals.times.withLock({ t in sent.contains { t[$0.id] == nil } }) {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        let times = arrivals.times.withLock { $0 }
        func finished(hit: Bool) throws -> [Double] {
            let mine = sent.filter { $0.hit == hit }
            let ms = mine.compactMap { s in times[s.id].map { ($0 - s.at).seconds * 1000 } }
            guard ms.count == mine.count else { throw CommandFailure("L: \(mine.count - ms.count) jobs sent no halcyon_job_finished; see \(log)") }
            return ms
        }
        let rows = try await c.rows(BenchSQL.StartDelays(keyPattern: "halcyon-bench:latency-\(run)-%")).map(\.ms)
        guard rows.count == samples else { throw CommandFailure("L: only \(rows.count) of \(samples) jobs started; see \(log)") }
        return LatencyRun(milliseconds: rows, finishedMiss: try finished(hit: false), finishedHit: try finished(hit: true))
    }
}

/// When each job's `halcyon_job_finished` arrived.
final class Arrivals: Sendable {
    let times = Mutex<[Int64: ContinuousClock.Instant]>([:])
}
