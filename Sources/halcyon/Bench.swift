import ArgumentParser
import Dispatch
import Foundation
import HalcyonCore
import HalcyonImage
import HalcyonQueue
import HalcyonStore

struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure W1 end to end through the queue, beside ImageMagick's convert on the same files.",
        discussion: """
            W1: every corpus image → resize(320x320, mode=fill) |> format(jpeg, quality=82).
            The corpus is generated (seeded, photo-like) under $HALCYON_HOME/bench/corpus: by
            default 100 × 1920×1080 JPEG q85 and 30 × 4032×3024 JPEG q90; --scale shrinks the
            counts for quick runs. Halcyon runs as a `halcyon work --drain` child (real queue,
            file:// sources, real store); its peak RSS and CPU come from wait4. Peers, when a
            real ImageMagick `convert` is installed (scripts/bench-peers-setup): naive
            (-resize WxH^ -gravity center -extent WxH) and tuned (-define jpeg:size as the
            shrink allows, one thread), one process per image, `--concurrency` at a time.
            On the embedded database the bench uses its own database, halcyon_bench; a database
            given with --database-url must hold no jobs but the bench's (it refuses otherwise).
            """)

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Scale the corpus counts (1 = 100 + 30 images).")
    var scale: Double = 1
    @Option(name: .customLong("repeat"), help: "Runs per tool; medians are reported.")
    var repeats: Int = 3
    @Option(help: "Processing slots for Halcyon and parallel processes for the peers. Default: cores.")
    var concurrency: Int = ProcessInfo.processInfo.activeProcessorCount
    @Flag(help: "Skip the convert peers.")
    var noPeers = false
    @Option(help: "Write the results as JSON here (default $HALCYON_HOME/bench/results.json).")
    var out: String?

    static let chain = "resize(320x320, mode=fill) |> format(jpeg, quality=82)"

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
        for round in 1...repeats {
            let h = try await runHalcyon(corpus, conninfo: conninfo, scratch: home.appendingPathComponent("scratch"))
            runs["halcyon", default: []].append(h)
            print("round \(round): halcyon \(h.line)")
            if !noPeers, let convert = Self.realConvert() {
                for tuned in [true, false] {
                    let r = try runConvert(convert, corpus, tuned: tuned, scratch: home.appendingPathComponent("scratch"))
                    runs[tuned ? "convert tuned" : "convert naive", default: []].append(r)
                    print("round \(round): convert \(tuned ? "tuned" : "naive") \(r.line)")
                }
            }
        }
        if !noPeers, Self.realConvert() == nil {
            print("peers skipped: no real ImageMagick `convert` (run scripts/bench-peers-setup)")
        }
        for name in ["halcyon", "convert tuned", "convert naive"] {
            if let r = runs[name] { results.append(BenchResult(tool: name, runs: r)) }
        }
        print(BenchResult.table(results, images: corpus.files.count, concurrency: concurrency, repeats: repeats))
        let json = BenchResult.json(results, corpus: corpus, concurrency: concurrency, chain: Self.chain)
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

    private func runHalcyon(_ corpus: BenchCorpus, conninfo: String, scratch: URL) async throws -> BenchRun {
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
        let log = scratch.appendingPathComponent("worker.log").path
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        let started = Date()
        let pid = try Subprocess.spawn(CommandLine.arguments[0], [
            "work", "--drain", "--database-url", conninfo, "--store", store.path, "--file-root", corpus.directory.path,
            "--concurrency", String(concurrency), "--log-level", "warning", "--worker-id", "halcyon-bench-\(getpid())", "--no-progress",
        ], outputPath: log)
        let progress = ProgressReporter(conninfo: conninfo, label: "images", expected: corpus.files.count, since: started)
        let usage = await Task.detached { Subprocess.waitWithUsage(pid) }.value
        await progress.finish()
        let seconds = Date().timeIntervalSince(started)
        guard usage.status == 0 else { throw CommandFailure("the worker exited \(usage.status); see \(log)") }
        let ok = try await c.execute("""
            SELECT count(*) FILTER (WHERE state = 'succeeded' AND result_width = 320 AND result_height = 320 AND result_format = 'jpeg') AS ok
            FROM halcyon.jobs
            """).value(0, "ok").flatMap { Int($0) } ?? 0
        await c.close()
        guard ok == corpus.files.count else { throw CommandFailure("only \(ok) of \(corpus.files.count) outputs are 320×320 JPEGs") }
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
                if tuned {
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
