import Dispatch
import Foundation
import HalcyonCLI
import HalcyonDomain
import HalcyonImage
import HalcyonRuntime
import HalcyonSamples
import HalcyonStore

/// The generated benchmark corpus: deterministic (seeded), reused when already present.
struct BenchCorpus {
    struct File { var path: String; var width: Int; var height: Int }
    var directory: URL
    var files: [File]
    var fingerprint: String
    var summary: String

    struct Kind {
        var count: Int, width: Int, height: Int, format: ImageFormat, quality: Int, alpha: Bool
        var label: String { format == .jpeg ? "JPEG q\(quality)" : "PNG\(alpha ? " with alpha" : "")" }
    }

    /// The corpus (issue #7): photo-like images with real entropy, in these counts at `--scale 1`.
    static let kinds: [Kind] = [
        Kind(count: 100, width: 1920, height: 1080, format: .jpeg, quality: 85, alpha: false),
        Kind(count: 30, width: 4032, height: 3024, format: .jpeg, quality: 90, alpha: false),
        Kind(count: 20, width: 1200, height: 800, format: .png, quality: 95, alpha: true),
    ]

    /// The corpus's `i`th image of `kind`: its file name and its generator's seed (P makes some
    /// of them alone, the same files).
    static func fileName(_ kind: Kind, _ i: Int) -> String {
        "w1-\(kind.width)x\(kind.height)-\(String(format: "%03d", i)).\(kind.format.fileExtension)"
    }
    static func seed(_ kind: Kind, _ i: Int) -> UInt64 { UInt64(kind.width * 1000 + i) }

    static func ensure(in directory: URL, scale: Double) throws -> BenchCorpus {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var specs: [(name: String, kind: Kind, seed: UInt64)] = []
        var parts: [String] = []
        for kind in kinds {
            let n = max(1, Int((Double(kind.count) * scale).rounded()))
            parts.append("\(n) × \(kind.width)×\(kind.height) \(kind.label)")
            for i in 0..<n { specs.append((fileName(kind, i), kind, seed(kind, i))) }
        }
        let missing = specs.filter { !FileManager.default.fileExists(atPath: directory.appendingPathComponent($0.name).path) }
        if !missing.isEmpty {
            print("generating \(missing.count) corpus images in \(directory.path)…")
            let failures = FailureCount()
            DispatchQueue.concurrentPerform(iterations: missing.count) { i in
                let s = missing[i]
                do {
                    let data = try SampleImages.photo(
                        width: s.kind.width, height: s.kind.height, seed: s.seed, format: s.kind.format,
                        quality: s.kind.quality, alpha: s.kind.alpha)
                    try data.write(to: directory.appendingPathComponent(s.name), options: .atomic)
                } catch {
                    failures.add()
                }
            }
            guard failures.value == 0 else { throw CommandFailure("could not generate \(failures.value) corpus images") }
        }
        var hashes: [String] = []
        for s in specs {
            guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(s.name).path) else {
                throw CommandFailure("cannot read corpus image \(s.name)")
            }
            hashes.append(Digest.sha256Hex(data))
        }
        return BenchCorpus(
            directory: directory,
            files: specs.map { File(path: directory.appendingPathComponent($0.name).path, width: $0.kind.width, height: $0.kind.height) },
            fingerprint: Digest.sha256Hex(hashes.joined()), summary: parts.joined(separator: " + "))
    }
}

private final class FailureCount: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    func add() { lock.lock(); n += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return n }
}

/// One timed run of one tool over the whole corpus.
struct BenchRun {
    var seconds: Double
    var cpuSeconds: Double
    var peakRSS: Int
    var images: Int
    /// Wall milliseconds per image (per source for W2), when the tool reports them.
    var perImageMs: [Double] = []
    /// Mean PSNR of the quality sample against the reference (W1 only).
    var psnr: Double? = nil
    /// Halcyon's mean CPU milliseconds per item in each stage (decode, process, encode, store),
    /// from the jobs' `timings`: CPU time on the thread that ran the stage.
    var stages: [(name: String, ms: Double)] = []
    /// How the whole machine's cores spent the run (Halcyon's runs): busy with anything, idle, stolen.
    var machine: MachineShare? = nil
    /// PostgreSQL's CPU seconds over the run (Halcyon's runs, when the bench can find the
    /// server's processes: the embedded cluster, or a server on this machine it may read).
    var databaseCPUSeconds: Double? = nil

    /// The share of the machine's cores the tool kept busy: CPU time over wall time × cores.
    var cpuUse: Double { cpuSeconds / (seconds * Double(ProcessInfo.processInfo.activeProcessorCount)) }

    var imagesPerSecond: Double { Double(images) / seconds }
    var line: String {
        var s = String(
            format: "%.1f images/s, %.0f CPU ms/image, peak RSS %.0f MB", imagesPerSecond, cpuSeconds * 1000 / Double(images), Double(peakRSS) / 1e6)
        if !perImageMs.isEmpty { s += String(format: ", %.0f/%.0f ms/image p50/p95", percentile(perImageMs, 50), percentile(perImageMs, 95)) }
        if let psnr { s += String(format: ", PSNR %.2f dB", psnr) }
        return s
    }
}

/// A tool's runs, summarised by medians.
struct BenchResult {
    var tool: String
    var runs: [BenchRun]

    var rate: Double { median(runs.map(\.imagesPerSecond)) }
    var rateMin: Double { runs.map(\.imagesPerSecond).min() ?? 0 }
    var rateMax: Double { runs.map(\.imagesPerSecond).max() ?? 0 }
    var cpuMs: Double { median(runs.map { $0.cpuSeconds * 1000 / Double($0.images) }) }
    var cpuUse: Double { median(runs.map(\.cpuUse)) }
    /// Median PostgreSQL CPU milliseconds per item over the runs that measured it.
    var databaseCPUMs: Double? {
        let measured = runs.compactMap { r in r.databaseCPUSeconds.map { $0 * 1000 / Double(r.images) } }
        return measured.isEmpty ? nil : median(measured)
    }
    /// Median over runs of the tool's and PostgreSQL's CPU milliseconds per item together.
    var cpuMsWithDatabase: Double? {
        let measured = runs.compactMap { r in r.databaseCPUSeconds.map { ($0 + r.cpuSeconds) * 1000 / Double(r.images) } }
        return measured.isEmpty ? nil : median(measured)
    }

    /// `halcyon and PostgreSQL: 36.1 CPU ms per image (PostgreSQL's 3.1), 1.38× the decode
    /// floor's 26.2`, or a line saying PostgreSQL's CPU was not measured, and why it may not be.
    func databaseLine(unit: String, floor: BenchResult?) -> String {
        guard let total = cpuMsWithDatabase, let database = databaseCPUMs else {
            return "PostgreSQL's CPU: not measured (no process of this machine was found listening where the "
                + "connection string points: a server on another machine, or its processes unreadable without root)"
        }
        var line = String(format: "%@ and PostgreSQL: %.1f CPU ms per %@ (PostgreSQL's backends %.1f)", tool, total, unit, database)
        if let floor, floor.cpuMs > 0 { line += String(format: ", %.2f× the decode floor's %.1f", total / floor.cpuMs, floor.cpuMs) }
        return line
    }

    /// `halcyon CPU ms per image by stage: decode 11.2 · …; the other 9.1` (medians over
    /// runs), or nil without stage times.
    func stageLine(unit: String) -> String? {
        guard let names = runs.first?.stages.map(\.name), !names.isEmpty else { return nil }
        let ms = names.map { name in median(runs.map { $0.stages.first { $0.name == name }?.ms ?? 0 }) }
        return "\(tool) CPU ms per \(unit) by stage (on the thread that ran it): "
            + zip(names, ms).map { String(format: "%@ %.1f", $0.0, $0.1) }.joined(separator: " · ")
            + String(
                format: "; the other %.1f of its %.1f — reading sources, the queue, the runtime, the kernel's work off those threads",
                max(0, cpuMs - ms.reduce(0, +)), cpuMs)
            + (machineLine.map { "\n" + $0 } ?? "")
    }

    /// `the machine's cores meanwhile: 91 % busy (halcyon's own 82 %; …), 6 % idle, 3 % stolen`.
    var machineLine: String? {
        let shares = runs.compactMap(\.machine)
        guard !shares.isEmpty else { return nil }
        return String(
            format:
                "the machine's cores meanwhile: %.0f %% busy (%@'s own %.0f %%; the rest PostgreSQL, the kernel's I/O, the bench), %.0f %% idle, %.0f %% stolen",
            median(shares.map(\.busy)) * 100, tool, cpuUse * 100, median(shares.map(\.idle)) * 100, median(shares.map(\.steal)) * 100)
    }
    var peakMB: Double { Double(runs.map(\.peakRSS).max() ?? 0) / 1e6 }
    /// Median over runs of each run's per-image p50 / p95 (nil when the tool has no per-image times).
    var p50: Double? { timed.isEmpty ? nil : median(timed.map { percentile($0.perImageMs, 50) }) }
    var p95: Double? { timed.isEmpty ? nil : median(timed.map { percentile($0.perImageMs, 95) }) }
    var psnr: Double? { runs.compactMap(\.psnr).first }
    private var timed: [BenchRun] { runs.filter { !$0.perImageMs.isEmpty } }

    /// `unit` names what one item is (image for W1, source for W2).
    static func table(_ title: String, _ results: [BenchResult], unit: String, count: Int, concurrency: Int, repeats: Int) -> String {
        var out =
            "\n\(title)\n\(count) \(unit)s, peers \(concurrency) at a time (Halcyon: its worker's processing slots), median of \(repeats) runs (min–max)\n"
        out += "tool            \(unit)s/s           ms/\(unit) p50/p95   CPU ms/\(unit)   CPU use   peak RSS/process   PSNR       Halcyon is\n"
        let halcyon = results.first { $0.tool == "halcyon" }?.rate
        for r in results {
            let ratio =
                halcyon.map { h in
                    r.tool == "halcyon" ? "—" : String(format: h >= r.rate ? "%.2f× faster" : "%.2f× (slower)", h / r.rate)
                } ?? ""
            let latency = r.p50.map { String(format: "%6.0f / %.0f", $0, r.p95 ?? 0) } ?? "     —"
            out +=
                r.tool.padding(toLength: 16, withPad: " ", startingAt: 0)
                + String(format: "%6.1f (%.1f–%.1f)", r.rate, r.rateMin, r.rateMax).padding(toLength: 20, withPad: " ", startingAt: 0)
                + latency.padding(toLength: 18, withPad: " ", startingAt: 0)
                + String(format: "%8.0f", r.cpuMs).padding(toLength: 14, withPad: " ", startingAt: 0)
                + String(format: "%5.0f %%", r.cpuUse * 100).padding(toLength: 10, withPad: " ", startingAt: 0)
                + (r.peakMB > 0 ? String(format: "%8.0f MB", r.peakMB) : "       —").padding(toLength: 19, withPad: " ", startingAt: 0)
                + (r.psnr.map { String(format: "%.2f dB", $0) } ?? "—").padding(toLength: 11, withPad: " ", startingAt: 0)
                + ratio + "\n"
        }
        return out
    }

    /// One result as JSON; `unit` is "image" or "source".
    func json(unit: String) -> JSONValue {
        var o: [String: JSONValue] = [
            "tool": .string(tool), "\(unit)s_per_second_median": .number((rate * 100).rounded() / 100),
            "\(unit)s_per_second_min": .number((rateMin * 100).rounded() / 100), "\(unit)s_per_second_max": .number((rateMax * 100).rounded() / 100),
            "cpu_ms_per_\(unit)": .number(cpuMs.rounded()), "peak_rss_bytes": .number(Double(runs.map(\.peakRSS).max() ?? 0)),
            "cpu_use": .number((cpuUse * 1000).rounded() / 1000),
            "runs": .array(
                runs.map {
                    [
                        "seconds": .number(($0.seconds * 1000).rounded() / 1000), "cpu_seconds": .number(($0.cpuSeconds * 1000).rounded() / 1000),
                        "peak_rss_bytes": .number(Double($0.peakRSS)),
                    ]
                }),
        ]
        if let databaseCPUMs, let cpuMsWithDatabase {
            o["database_cpu_ms_per_\(unit)"] = .number((databaseCPUMs * 10).rounded() / 10)
            o["cpu_ms_per_\(unit)_with_database"] = .number((cpuMsWithDatabase * 10).rounded() / 10)
        }
        if let p50, let p95 { o["ms_per_\(unit)_p50"] = .number(p50.rounded()); o["ms_per_\(unit)_p95"] = .number(p95.rounded()) }
        if let psnr { o["psnr_db"] = .number((psnr * 100).rounded() / 100) }
        let shares = runs.compactMap(\.machine)
        if !shares.isEmpty {
            o["machine_busy"] = .number((median(shares.map(\.busy)) * 1000).rounded() / 1000)
            o["machine_idle"] = .number((median(shares.map(\.idle)) * 1000).rounded() / 1000)
            o["machine_steal"] = .number((median(shares.map(\.steal)) * 1000).rounded() / 1000)
        }
        if let names = runs.first?.stages.map(\.name), !names.isEmpty {
            o["stage_cpu_ms_per_\(unit)"] = .object(
                Dictionary(
                    uniqueKeysWithValues: names.map { name in
                        (name, JSONValue.number((median(runs.map { $0.stages.first { $0.name == name }?.ms ?? 0 }) * 10).rounded() / 10))
                    }))
        }
        return .object(o)
    }

    static func json(_ results: [BenchResult], corpus: BenchCorpus, concurrency: Int, chain: String, versions: [String: String]) -> JSONValue {
        var uts = utsname()
        uname(&uts)
        let machine = withUnsafeBytes(of: uts.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let kernel = withUnsafeBytes(of: uts.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return [
            "scenario": "W1", "chain": .string(chain), "concurrency": .number(Double(concurrency)),
            "machine": [
                "cores": .number(Double(ProcessInfo.processInfo.activeProcessorCount)), "arch": .string(machine),
                "kernel": .string(kernel), "memory_bytes": .number(Double(ProcessInfo.processInfo.physicalMemory)),
                "imagemagick": .string(MagickImage.version),
            ],
            "versions": .object(versions.mapValues { .string($0) }),
            "corpus": [
                "summary": .string(corpus.summary), "images": .number(Double(corpus.files.count)), "fingerprint": .string(corpus.fingerprint),
            ],
            "results": .array(results.map { $0.json(unit: "image") }),
        ]
    }
}

/// H: store-hit throughput (the W1 jobs again, copied to about 5,000, on the filled store).
struct HitRun {
    var jobs: Int
    /// The drain, as each tool's own clock sees it: pgqueuer's `QueueManager.run` (after its
    /// process started, connected and installed its schema); Halcyon's first claim to its last
    /// recorded completion (the database's clock), so that neither counts starting a process.
    var seconds: Double
    var cpuSeconds: Double
    /// Jobs per claim (pgqueuer's batch size); nil for Halcyon (its hit claims, up to 250).
    var batch: Int? = nil
    /// Halcyon's whole `work --drain` process, start to exit.
    var processSeconds: Double? = nil

    var jobsPerSecond: Double { Double(jobs) / seconds }
    var line: String {
        String(format: "%d store hits in %.2f s = %.0f jobs/s, %.2f CPU ms/job", jobs, seconds, jobsPerSecond, cpuSeconds * 1000 / Double(jobs))
    }

    /// Halcyon's hit claims take up to this many jobs (`--hit-claim-batch`'s default).
    static let halcyonBatch = 250

    /// The median jobs per second of `runs`.
    static func medianRate(_ runs: [HitRun]) -> Double { median(runs.map(\.jobsPerSecond)) }

    static func summary(_ runs: [HitRun], peers: [Int: [HitRun]] = [:]) -> String {
        let rates = runs.map(\.jobsPerSecond)
        var out = String(
            format: "H — store hits: %.0f jobs/s (%.0f–%.0f), %.2f CPU ms/job, one worker process, %d jobs per run, hit claims of up to %d\n",
            median(rates), rates.min() ?? 0, rates.max() ?? 0, median(runs.map { $0.cpuSeconds * 1000 / Double($0.jobs) }),
            runs.first?.jobs ?? 0, halcyonBatch)
        let whole = runs.compactMap { run in run.processSeconds.map { Double(run.jobs) / $0 } }
        if !whole.isEmpty {
            out += String(
                format: "    (first claim to last completion; the whole process, start to exit: %.0f jobs/s (%.0f–%.0f))\n", median(whole),
                whole.min() ?? 0, whole.max() ?? 0)
        }
        for (batch, peer) in peers.sorted(by: { $0.key < $1.key }) {
            let p = peer.map(\.jobsPerSecond)
            out += String(
                format: "    pgqueuer, no-op jobs, batch %d: %.0f jobs/s (%.0f–%.0f), %.2f CPU ms/job — Halcyon is %.2f×\n", batch, median(p),
                p.min() ?? 0, p.max() ?? 0, median(peer.map { $0.cpuSeconds * 1000 / Double($0.jobs) }), median(rates) / max(median(p), 1e-9))
        }
        return out
    }

    static func json(_ runs: [HitRun], peers: [Int: [HitRun]] = [:]) -> JSONValue {
        func runsJSON(_ runs: [HitRun]) -> JSONValue {
            .array(
                runs.map {
                    [
                        "jobs": .number(Double($0.jobs)), "seconds": .number(($0.seconds * 1000).rounded() / 1000),
                        "cpu_seconds": .number(($0.cpuSeconds * 1000).rounded() / 1000),
                        "process_seconds": $0.processSeconds.map { .number(($0 * 1000).rounded() / 1000) } ?? .null,
                    ]
                })
        }
        return [
            "jobs_per_second_median": .number(median(runs.map(\.jobsPerSecond)).rounded()),
            "runs": runsJSON(runs),
            "pgqueuer": .array(
                peers.sorted(by: { $0.key < $1.key }).map { batch, peer in
                    [
                        "batch": .number(Double(batch)), "jobs_per_second_median": .number(median(peer.map(\.jobsPerSecond)).rounded()),
                        "runs": runsJSON(peer),
                    ]
                }),
        ]
    }
}

/// L: enqueue → start latency with an idle worker.
struct LatencyRun {
    /// enqueue → claim (`started_at - created_at`), misses.
    var milliseconds: [Double]
    /// enqueue → `halcyon_job_finished` received, for misses and for store hits.
    var finishedMiss: [Double] = []
    var finishedHit: [Double] = []

    func percentile(_ p: Double) -> Double { HalcyonBench.percentile(milliseconds, p) }
    var line: String {
        String(
            format:
                "enqueue→start p50 %.1f ms, p95 %.1f ms, p99 %.1f ms (%d jobs); enqueue→finished notification: miss p50 %.1f / p95 %.1f ms, hit p50 %.1f / p95 %.1f ms",
            percentile(50), percentile(95), percentile(99), milliseconds.count,
            HalcyonBench.percentile(finishedMiss, 50), HalcyonBench.percentile(finishedMiss, 95),
            HalcyonBench.percentile(finishedHit, 50), HalcyonBench.percentile(finishedHit, 95))
    }

    static func summary(_ runs: [LatencyRun]) -> String {
        String(
            format: "L — enqueue→start with an idle worker: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms (medians of %d runs)\n"
                + "    enqueue→halcyon_job_finished: miss p50 %.1f ms, p95 %.1f ms; store hit p50 %.1f ms, p95 %.1f ms\n",
            median(runs.map { $0.percentile(50) }), median(runs.map { $0.percentile(95) }), median(runs.map { $0.percentile(99) }), runs.count,
            median(runs.map { HalcyonBench.percentile($0.finishedMiss, 50) }), median(runs.map { HalcyonBench.percentile($0.finishedMiss, 95) }),
            median(runs.map { HalcyonBench.percentile($0.finishedHit, 50) }), median(runs.map { HalcyonBench.percentile($0.finishedHit, 95) }))
    }

    static func json(_ runs: [LatencyRun]) -> JSONValue {
        func ms(_ values: [Double]) -> JSONValue { .number((median(values) * 10).rounded() / 10) }
        return [
            "p50_ms": ms(runs.map { $0.percentile(50) }),
            "p95_ms": ms(runs.map { $0.percentile(95) }),
            "p99_ms": ms(runs.map { $0.percentile(99) }),
            "finished_miss_p50_ms": ms(runs.map { HalcyonBench.percentile($0.finishedMiss, 50) }),
            "finished_miss_p95_ms": ms(runs.map { HalcyonBench.percentile($0.finishedMiss, 95) }),
            "finished_hit_p50_ms": ms(runs.map { HalcyonBench.percentile($0.finishedHit, 50) }),
            "finished_hit_p95_ms": ms(runs.map { HalcyonBench.percentile($0.finishedHit, 95) }),
        ]
    }
}

/// The `p`th percentile (nearest rank); 0 for none.
func percentile(_ values: [Double], _ p: Double) -> Double {
    let s = values.sorted()
    guard !s.isEmpty else { return 0 }
    return s[max(0, min(s.count - 1, Int((p / 100 * Double(s.count)).rounded(.up)) - 1))]
}

/// The median (the mean of the middle two for an even count); 0 for none.
func median(_ values: [Double]) -> Double {
    let s = values.sorted()
    guard !s.isEmpty else { return 0 }
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

/// One hot statement's latencies, in milliseconds.
struct StatementTiming {
    var name: String
    var milliseconds: [Double]

    static let claim = "claim 6"
    static let unpreparedClaim = "claim 6, unprepared"
    static let serverClaim = "claim 6, server's settings"
    /// The order they are reported in.
    static let order = [
        claim, unpreparedClaim, serverClaim, "heartbeat", "complete (group commit)", "fail (retry)", "claim 250 (store hits)", "release 250",
        "rescue",
        "webhook take", "dashboard overview",
    ]

    var p50: Double { percentile(milliseconds, 50) }
    var p99: Double { percentile(milliseconds, 99) }
}

/// S: one backlog size.
struct ScaleRun {
    /// Queued jobs in the backlog.
    var queued: Int
    /// The fair keys its jobs are spread over (0: none).
    var fairKeys = 0
    /// Rows in the table (history, backlog).
    var rows: Int
    /// Two workers' finished jobs per second, after a period of work and an ANALYZE.
    var jobsPerSecond: Double
    var statements: [StatementTiming]

    var claim: StatementTiming? { statements.first { $0.name == StatementTiming.claim } }

    /// `1000000 queued`, or `1000000 over 10000 keys`.
    var shape: String { fairKeys > 0 ? "\(queued) over \(fairKeys) keys" : "\(queued) queued" }

    var line: String {
        shape + String(format: " (%d rows): two workers %.0f jobs/s", rows, jobsPerSecond)
            + (claim.map { String(format: "; claim p50 %.1f ms, p99 %.1f ms", $0.p50, $0.p99) } ?? "")
    }

    /// The two workers' throughput at the largest backlog against the smallest (1.0: as fast),
    /// both without fair keys.
    static func throughputRatio(_ runs: [ScaleRun]) -> Double {
        let runs = runs.filter { $0.fairKeys == 0 }
        guard let small = runs.min(by: { $0.queued < $1.queued }), let large = runs.max(by: { $0.queued < $1.queued }), small.jobsPerSecond > 0
        else { return 0 }
        return large.jobsPerSecond / small.jobsPerSecond
    }

    static func summary(_ runs: [ScaleRun]) -> String {
        guard let smallest = runs.min(by: { $0.queued < $1.queued }) else { return "" }
        var out = "S — the queue with a backlog (a table as hours of work leave it; two workers, then each statement alone):\n"
        out += "  queued                   rows        jobs/s   × smallest\n"
        for r in runs {
            out +=
                "  " + r.shape.padding(toLength: 23, withPad: " ", startingAt: 0)
                + String(format: "  %-10d  %7.0f   %.2f×\n", r.rows, r.jobsPerSecond, r.jobsPerSecond / max(smallest.jobsPerSecond, 0.001))
        }
        out += "  statement latency, ms (p50 / p99)" + runs.map { " | \($0.shape)" }.joined() + "\n"
        for name in StatementTiming.order {
            let cells = runs.map { r in
                r.statements.first { $0.name == name }.map { String(format: "%6.2f / %6.2f", $0.p50, $0.p99) } ?? "      –       "
            }
            guard cells.contains(where: { !$0.contains("–") }) else { continue }
            out += "  " + name.padding(toLength: 33, withPad: " ", startingAt: 0) + cells.map { " | " + $0 }.joined() + "\n"
        }
        return out
    }

    static func json(_ runs: [ScaleRun]) -> JSONValue {
        [
            "throughput_ratio": .number((throughputRatio(runs) * 100).rounded() / 100),
            "runs": .array(
                runs.map { r in
                    [
                        "queued": .number(Double(r.queued)), "fair_keys": .number(Double(r.fairKeys)), "rows": .number(Double(r.rows)),
                        "jobs_per_second": .number(r.jobsPerSecond.rounded()),
                        "statements": .array(
                            r.statements.map {
                                [
                                    "name": .string($0.name), "samples": .number(Double($0.milliseconds.count)),
                                    "p50_ms": .number(($0.p50 * 100).rounded() / 100), "p99_ms": .number(($0.p99 * 100).rounded() / 100),
                                ]
                            }),
                    ]
                }),
        ]
    }
}

/// The soak: finished jobs and each worker's processes' RSS over time, reported per tenth of
/// the run. A worker is a tree: the supervisor (`halcyon work`, no image work) and its image
/// process (the child that claims, fetches, decodes and stores), each sampled on its own — the
/// image process is where a job can leave something behind.
struct SoakRun {
    struct Sample {
        var seconds: Double
        var value: Int
    }

    /// One worker's processes at one instant, bytes resident (nil: not running then).
    struct Tree: Equatable {
        var supervisor: Int?
        var image: Int?
        var total: Int { (supervisor ?? 0) + (image ?? 0) }
    }

    /// Every worker's tree at one instant.
    struct TreeSample {
        var seconds: Double
        var trees: [Tree]
    }

    struct Part {
        /// 1…10: which tenth of the finished jobs.
        var tenth: Int
        var seconds: Double
        var jobsPerSecond: Double
        /// Each worker's supervisor and image process: their median resident sets over this
        /// tenth's samples (the level: a leak moves it) …
        var trees: [Tree]
        /// … and their largest (the level plus whatever the jobs in hand held at the time).
        var peaks: [Tree]
        /// The larger worker tree's (supervisor and image process together) largest resident set.
        var rss: Int { peaks.map(\.total).max() ?? 0 }
    }

    var jobs: Int
    /// What the jobs were: sources and chains, for the report.
    var workload = ""
    /// Jobs finished since the start (a count of rows, taken now and then).
    var finished: [Sample] = []
    /// Every worker's tree, every 100 ms.
    var samples: [TreeSample] = []
    /// Image processes started after the first, per worker (a restart means a crash).
    var imageRestarts: [Int] = []

    var total: Int { finished.last?.value ?? 0 }
    var seconds: Double { finished.last?.seconds ?? 0 }
    var workers: Int { samples.map(\.trees.count).max() ?? 0 }

    /// When the finished count first reached `target` (linear between samples).
    private func time(reaching target: Double) -> Double {
        var previous = Sample(seconds: 0, value: 0)
        for s in finished {
            if Double(s.value) >= target {
                let span = Double(s.value - previous.value)
                return span > 0 ? previous.seconds + (s.seconds - previous.seconds) * (target - Double(previous.value)) / span : s.seconds
            }
            previous = s
        }
        return seconds
    }

    var parts: [Part] {
        let total = Double(self.total)
        guard total > 0 else { return [] }
        let workers = self.workers
        var out: [Part] = []
        var start = 0.0
        for tenth in 1...10 {
            let end = time(reaching: total * Double(tenth) / 10)
            // The samples in this tenth, or the one nearest it when it was shorter than a sample.
            let inside = samples.filter { $0.seconds >= start && $0.seconds <= end }
            let nearest = samples.min { abs($0.seconds - end) < abs($1.seconds - end) }
            let taken = inside.isEmpty ? nearest.map { [$0] } ?? [] : inside
            let these = (0..<workers).map { w in taken.compactMap { $0.trees.indices.contains(w) ? $0.trees[w] : nil } }
            let medians = these.map { Tree(supervisor: Self.median($0.compactMap(\.supervisor)), image: Self.median($0.compactMap(\.image))) }
            let peaks = these.map { Tree(supervisor: $0.compactMap(\.supervisor).max(), image: $0.compactMap(\.image).max()) }
            out.append(
                Part(tenth: tenth, seconds: end - start, jobsPerSecond: end > start ? total / 10 / (end - start) : 0, trees: medians, peaks: peaks))
            start = end
        }
        return out
    }

    /// Each worker's image process in the last tenth against the second (the first is warm-up:
    /// ImageMagick's coders, the thread pools and malloc's arenas filling), medians, as a ratio.
    var imageGrowth: [Double?] {
        let parts = self.parts
        guard parts.count == 10 else { return [] }
        return (0..<workers).map { w in
            guard let second = parts[1].trees[w].image, let last = parts[9].trees[w].image, second > 0 else { return nil }
            return Double(last) / Double(second)
        }
    }

    static func median(_ values: [Int]) -> Int? {
        values.isEmpty ? nil : values.sorted()[values.count / 2]
    }

    static func mb(_ bytes: Int?) -> String { bytes.map { String(format: "%.1f", Double($0) / 1e6) } ?? "–" }

    var summary: String {
        let parts = self.parts
        var out = "Soak — \(jobs) queued jobs (the S backlog, none delayed or failing"
        out += workload.isEmpty ? "" : "; \(workload)"
        out += ") drained by \(workers) workers: \(total) finished in " + TimeSpan.format(seconds) + "\n"
        out += "  resident MB per tenth, each worker's supervisor (sup) and image process (image): the median of the tenth's "
        out += "samples, and the image process's largest (peak)\n"
        out += "  tenth   seconds   jobs/s" + (1...max(1, workers)).map { "   w\($0) sup  w\($0) image  w\($0) peak" }.joined() + "\n"
        for p in parts {
            out += String(format: "  %2d      %7.1f   %6.0f", p.tenth, p.seconds, p.jobsPerSecond)
            for (t, peak) in zip(p.trees, p.peaks) {
                out += "   " + Self.pad(Self.mb(t.supervisor), 6) + "   " + Self.pad(Self.mb(t.image), 8) + "   " + Self.pad(Self.mb(peak.image), 7)
            }
            out += "\n"
        }
        if let first = parts.first, let last = parts.last, first.jobsPerSecond > 0 {
            out += String(format: "  last tenth against the first: %.2f× the throughput\n", last.jobsPerSecond / first.jobsPerSecond)
        }
        for (w, growth) in imageGrowth.enumerated() {
            guard let growth else { continue }
            out += "  worker \(w + 1)'s image process, last tenth against the second (after warm-up): "
            out += "\(Self.mb(parts[1].trees[w].image)) → \(Self.mb(parts[9].trees[w].image)) MB"
            out += String(format: " (%+.1f %%)\n", (growth - 1) * 100)
        }
        let restarts = imageRestarts.reduce(0, +)
        if restarts > 0 { out += "  image processes restarted: \(restarts) (a crash each: see the workers' logs)\n" }
        return out
    }

    private static func pad(_ s: String, _ width: Int) -> String {
        String(repeating: " ", count: max(0, width - s.count)) + s
    }

    var json: JSONValue {
        func bytes(_ b: Int?) -> JSONValue { b.map { .number(Double($0)) } ?? .null }
        return [
            "jobs": .number(Double(jobs)), "finished": .number(Double(total)), "seconds": .number((seconds * 10).rounded() / 10),
            "workload": .string(workload),
            "image_restarts": .array(imageRestarts.map { .number(Double($0)) }),
            "image_growth": .array(imageGrowth.map { g in g.map { .number(($0 * 1000).rounded() / 1000) } ?? .null }),
            "tenths": .array(
                parts.map {
                    [
                        "tenth": .number(Double($0.tenth)), "seconds": .number(($0.seconds * 10).rounded() / 10),
                        "jobs_per_second": .number($0.jobsPerSecond.rounded()), "worker_rss_bytes": .number(Double($0.rss)),
                        "workers": .array(
                            zip($0.trees, $0.peaks).map { median, peak in
                                [
                                    "supervisor_rss_bytes": bytes(median.supervisor), "image_rss_bytes": bytes(median.image),
                                    "supervisor_peak_rss_bytes": bytes(peak.supervisor), "image_peak_rss_bytes": bytes(peak.image),
                                ]
                            }),
                    ]
                }),
        ]
    }
}
