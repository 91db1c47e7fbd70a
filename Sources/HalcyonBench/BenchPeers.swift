import Dispatch
import Foundation
import HalcyonCLI
import HalcyonEmbedded
import HalcyonRuntime

/// The tools `halcyon bench` measures Halcyon against, on the same files in the same run:
/// ImageMagick's `convert` (naive and tuned, one process per image), `vipsthumbnail` (batched,
/// one process per core) and Pillow with draft() (one long-lived process per core). Each is
/// found on this machine or skipped with a note; `scripts/bench-peers-setup` installs them.
struct BenchPeers {
    var concurrency: Int
    var corpus: BenchCorpus
    var scratch: URL
    var quality: BenchQuality

    /// The workload a peer runs: W1's one output per source, W2's three, W3's two effects.
    enum Scenario: CaseIterable {
        case w1, w2, w3
        var label: String { "\(self)".uppercased() }
        var benchScenario: Bench.Scenario {
            switch self {
            case .w1: .w1
            case .w2: .w2
            case .w3: .w3
            }
        }
        /// The outputs' extensions, one per chain.
        var extensions: [String] {
            switch self {
            case .w1: ["jpg"]
            case .w2: ["jpg", "webp", "png"]
            case .w3: ["png", "webp"]
            }
        }
    }

    // MARK: Finding the tools

    /// A real ImageMagick `convert` (some machines put a stand-in first on PATH).
    static func convert() -> String? {
        find("convert", versionArgs: ["-version"], versionPrefix: "Version: ImageMagick")
    }

    /// libvips' `vipsthumbnail` (Debian: libvips-tools).
    static func vipsthumbnail() -> String? {
        find("vipsthumbnail", versionArgs: ["--vips-version"], versionPrefix: "libvips")
    }

    /// `scripts/bench-pillow.py`, when python3 has Pillow.
    static func pillowScript() -> String? { pythonScript("bench-pillow.py", importing: "PIL") }

    /// `scripts/bench-pgqueuer.py`, when python3 has pgqueuer and asyncpg.
    static func pgqueuerScript() -> String? { pythonScript("bench-pgqueuer.py", importing: "pgqueuer, asyncpg") }

    /// `scripts/<name>`, when it is found and python3 can import `modules`.
    private static func pythonScript(_ name: String, importing modules: String) -> String? {
        guard let dir = try? ResourceLocator.find("scripts", marker: name, environment: "HALCYON_SCRIPTS").found else { return nil }
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-check-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        guard (try? Subprocess.run("/usr/bin/env", ["python3", "-c", "import \(modules)"], outputPath: out)) == 0 else { return nil }
        return dir.appendingPathComponent(name).path
    }

    /// Where pgqueuer connects: a socket directory (or host), a port and a database.
    struct PeerDatabase { var host: String, port: Int, user: String, database: String }

    /// pgqueuer draining `jobs` no-op jobs with one QueueManager, `batch` at a time, in
    /// `database` (its own: pgqueuer installs its tables there and drops them).
    static func pgqueuer(_ script: String, database: PeerDatabase, jobs: Int, batch: Int, log: URL) async throws -> HitRun {
        let pid = try Subprocess.spawn(
            "/usr/bin/env",
            ["python3", script, database.host, String(database.port), database.user, database.database, String(jobs), String(batch)],
            outputPath: log.path)
        let usage = try await Blocking.run { Subprocess.waitWithUsage(pid) }
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        guard usage.status == 0, let line = text.split(separator: "\n").last(where: { $0.hasPrefix("{") }),
            case .object(let o)? = JSONValue.parse(String(line)), let seconds = o["seconds"]?.numberValue
        else { throw CommandFailure("pgqueuer exited \(usage.status); see \(log.path)") }
        return HitRun(jobs: jobs, seconds: seconds, cpuSeconds: usage.cpuSeconds, batch: batch)
    }

    /// The first line of each tool's version output, for the results file.
    static func versions(convert: String?, vips: String?, pillow: String?) -> [String: String] {
        var out: [String: String] = [:]
        func first(_ tool: String, _ args: [String]) -> String? {
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("bench-version-\(getpid())").path
            defer { try? FileManager.default.removeItem(atPath: file) }
            guard (try? Subprocess.run(tool, args, outputPath: file)) == 0, let d = FileManager.default.contents(atPath: file) else { return nil }
            return String(decoding: d, as: UTF8.self).split(separator: "\n").first.map(String.init)
        }
        if let convert { out["convert"] = first(convert, ["-version"]) }
        if let vips { out["vipsthumbnail"] = first(vips, ["--vips-version"]) }
        if let v = first("/usr/bin/env", ["python3", "-c", "import pgqueuer; print('pgqueuer', pgqueuer.__version__)"]) { out["pgqueuer"] = v }
        if pillow != nil {
            out["pillow"] = first(
                "/usr/bin/env", ["python3", "-c", "import PIL, sys; print('Pillow', PIL.__version__, 'on Python', sys.version.split()[0])"])
        }
        return out
    }

    private static func find(_ name: String, versionArgs: [String], versionPrefix: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for candidate in ["/usr/bin/\(name)"] + path.split(separator: ":").map({ "\($0)/\(name)" })
        where FileManager.default.isExecutableFile(atPath: candidate) {
            let out = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-version-\(getpid())").path
            defer { try? FileManager.default.removeItem(atPath: out) }
            if (try? Subprocess.run(candidate, versionArgs, outputPath: out)) == 0,
                let text = FileManager.default.contents(atPath: out), String(decoding: text, as: UTF8.self).hasPrefix(versionPrefix)
            {
                return candidate
            }
        }
        return nil
    }

    // MARK: Running them

    /// Pillow with draft() in `concurrency` long-lived processes (`scripts/bench-pillow.py`).
    /// CPU covers the pool's processes; peak RSS is the largest of them (they fork from the parent).
    func pillow(_ script: String, _ scenario: Scenario) async throws -> BenchRun {
        let outDir = try freshDirectory("pillow")
        defer { try? FileManager.default.removeItem(at: outDir) }
        let log = scratch.appendingPathComponent("pillow.log")
        let started = Date()
        let pid = try Subprocess.spawn(
            "/usr/bin/env",
            ["python3", script] + (scenario == .w1 ? [] : ["--\(scenario)"]) + [outDir.path, String(concurrency)]
                + corpus.files.map(\.path), outputPath: log.path)
        let usage = try await Blocking.run { Subprocess.waitWithUsage(pid) }
        let seconds = Date().timeIntervalSince(started)
        try expectOutputs(in: outDir, scenario, tool: "Pillow", status: usage.status, log: log)
        // The script prints "ms <index> <milliseconds>" per image.
        let ms =
            (try? String(contentsOf: log, encoding: .utf8))?.split(separator: "\n").compactMap { line -> Double? in
                let f = line.split(separator: " ")
                return f.count == 3 && f[0] == "ms" ? Double(f[2]) : nil
            } ?? []
        return BenchRun(
            seconds: seconds, cpuSeconds: usage.cpuSeconds, peakRSS: usage.peakRSS, images: corpus.files.count,
            perImageMs: ms, psnr: scenario == .w1 ? quality.score { outDir.appendingPathComponent("\($0).jpg").path } : nil)
    }

    /// `vipsthumbnail` over the corpus split into `concurrency` batches, one process each with
    /// one libvips thread; transparency flattened onto white as Halcyon does. W1 only (one
    /// size per invocation). No per-image times: a batch is timed as a whole.
    func vips(_ vipsthumbnail: String) async throws -> BenchRun {
        let outDir = try freshDirectory("vips")
        defer { try? FileManager.default.removeItem(at: outDir) }
        var environment = ProcessInfo.processInfo.environment
        environment["VIPS_CONCURRENCY"] = "1"
        let batches = (0..<concurrency).map { k in stride(from: k, to: corpus.files.count, by: concurrency).map { corpus.files[$0].path } }
            .filter { !$0.isEmpty }
        let log = scratch.appendingPathComponent("vips.log")
        let started = Date()
        var pids: [pid_t] = []
        for (k, batch) in batches.enumerated() {
            pids.append(
                try Subprocess.spawn(
                    vipsthumbnail, ["-s", "320x320", "-m", "centre", "-o", outDir.path + "/%s.jpg[Q=82,background=255]"] + batch,
                    outputPath: log.path + ".\(k)", environment: environment))
        }
        let spawned = pids
        let usages = try await Blocking.run { spawned.map { Subprocess.waitWithUsage($0) } }
        let seconds = Date().timeIntervalSince(started)
        try expectOutputs(in: outDir, .w1, tool: "vipsthumbnail", status: usages.map(\.status).max() ?? 0, log: log.appendingPathExtension("0"))
        let names = corpus.files.map { URL(fileURLWithPath: $0.path).deletingPathExtension().lastPathComponent }
        return BenchRun(
            seconds: seconds, cpuSeconds: usages.reduce(0) { $0 + $1.cpuSeconds }, peakRSS: usages.map(\.peakRSS).max() ?? 0,
            images: corpus.files.count, psnr: quality.score { outDir.appendingPathComponent(names[$0] + ".jpg").path })
    }

    /// `convert` once per image, `concurrency` at a time. Naive: `-resize WxH^ -gravity center
    /// -extent WxH` on the full decode. Tuned: `-define jpeg:size` as small as the output allows,
    /// one thread. W2 (tuned only): one process per source writing the three variants from one
    /// decode (`+clone … -write`).
    func convert(_ convert: String, tuned: Bool, _ scenario: Scenario) async throws -> BenchRun {
        let outDir = try freshDirectory("convert-\(tuned ? "tuned" : "naive")")
        defer { try? FileManager.default.removeItem(at: outDir) }
        var environment = ProcessInfo.processInfo.environment
        if tuned { environment["MAGICK_THREAD_LIMIT"] = "1" }
        let env = environment, files = corpus.files, concurrency = concurrency
        let started = Date()
        let usages = try await Blocking.run {  // concurrentPerform blocks: off the cooperative pool
            let next = Counter(), usages = UsageBox()
            DispatchQueue.concurrentPerform(iterations: concurrency) { _ in
                while let i = next.take(below: files.count) {
                    let args = Self.convertArguments(files[i], index: i, outDir: outDir, tuned: tuned, scenario)
                    let began = Date()
                    if let pid = try? Subprocess.spawn(convert, args, outputPath: outDir.appendingPathComponent("\(i).log").path, environment: env) {
                        usages.add(Subprocess.waitWithUsage(pid), milliseconds: Date().timeIntervalSince(began) * 1000)
                    }
                }
            }
            return usages
        }
        let seconds = Date().timeIntervalSince(started)
        try expectOutputs(in: outDir, scenario, tool: "convert", status: usages.failures == 0 ? 0 : 1, log: outDir.appendingPathComponent("0.log"))
        return BenchRun(
            seconds: seconds, cpuSeconds: usages.cpu, peakRSS: usages.peak, images: files.count, perImageMs: usages.milliseconds,
            psnr: scenario == .w1 ? quality.score { outDir.appendingPathComponent("\($0).jpg").path } : nil)
    }

    static func convertArguments(_ f: BenchCorpus.File, index i: Int, outDir: URL, tuned: Bool, _ scenario: Scenario) -> [String] {
        var args: [String] = []
        if tuned, f.path.hasSuffix(".jpg") {
            // The smallest decode libjpeg may scale to that still covers the largest output.
            let k: Double
            switch scenario {
            case .w1: k = max(320 / Double(f.width), 320 / Double(f.height))
            case .w2: k = 1024 / Double(max(f.width, f.height))
            case .w3: k = max(800 / Double(max(f.width, f.height)), 640 / Double(min(f.width, f.height)))
            }
            args += ["-define", "jpeg:size=\(Int((Double(f.width) * k).rounded(.up)))x\(Int((Double(f.height) * k).rounded(.up)))"]
        }
        args += [f.path]
        // JPEG has no alpha: flattened as Halcyon does. W3's outputs (PNG, WebP) keep it.
        if !f.path.hasSuffix(".jpg"), scenario != .w3 { args += ["-background", "white", "-alpha", "remove"] }
        func out(_ ext: String) -> String { outDir.appendingPathComponent("\(i).\(ext)").path }
        switch scenario {
        case .w1:
            args += ["-resize", "320x320^", "-gravity", "center", "-extent", "320x320", "-quality", "82", out("jpg")]
        case .w2:
            args += [
                "(", "+clone", "-resize", "320x320^", "-gravity", "center", "-extent", "320x320", "-quality", "82", "-write", out("jpg"), "+delete",
                ")",
                "(", "+clone", "-resize", "1024x1024", "-quality", "80", "-write", out("webp"), "+delete", ")",
                "-resize", "64x64^", "-gravity", "center", "-extent", "64x64", out("png"),
            ]
        case .w3:
            // The fitted size, for the rounded-corner mask (what Halcyon's resize(800x800) gives).
            let k = 800 / Double(max(f.width, f.height))
            let w = Int((Double(f.width) * k).rounded()), h = Int((Double(f.height) * k).rounded())
            args += [
                "(", "+clone", "-resize", "800x800", "-blur", "0x2", "-alpha", "set",
                // The mask from a transparent clone (Halcyon's policy, which the bench runs under, blocks xc:).
                "(", "+clone", "-alpha", "transparent", "-fill", "white", "-draw", "roundrectangle 0,0,\(w - 1),\(h - 1),24,24", ")",
                "-compose", "DstIn", "-composite", "-compose", "Over",
                "-channel", "RGB", "-evaluate", "multiply", "0.8", "+channel", "-write", out("png"), "+delete", ")",
                "-resize", "640x640^", "-gravity", "center", "-extent", "640x640", "-unsharp", "0x1",
                "-function", "polynomial", "1.2,-0.1", "-modulate", "100,130,100", "-quality", "80", out("webp"),
            ]
        }
        return args
    }

    private func freshDirectory(_ name: String) throws -> URL {
        let dir = scratch.appendingPathComponent(name)
        try? FileManager.default.removeItem(at: dir)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// Every source made its output(s): one JPEG for W1; a JPEG, a WebP and a PNG for W2.
    private func expectOutputs(in dir: URL, _ scenario: Scenario, tool: String, status: Int32, log: URL) throws {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        let exts = scenario.extensions
        let made = names.filter { exts.contains(URL(fileURLWithPath: $0).pathExtension) }.count
        let expected = corpus.files.count * exts.count
        guard status == 0, made == expected else {
            // The log may be inside a directory the caller removes: its end goes into the error.
            let tail = (try? String(contentsOf: log, encoding: .utf8)).map { String($0.suffix(600)) } ?? "(no log)"
            throw CommandFailure("\(tool) produced \(made) of \(expected) outputs (exit \(status)); \(log.path) ends: \(tail)")
        }
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

/// Sums the peers' CPU, keeps their peak RSS and each process's wall time.
private final class UsageBox: @unchecked Sendable {
    private let lock = NSLock()
    private(set) var cpu = 0.0, peak = 0, failures = 0, milliseconds: [Double] = []
    func add(_ u: Subprocess.Usage, milliseconds ms: Double) {
        lock.lock(); defer { lock.unlock() }
        cpu += u.cpuSeconds
        peak = max(peak, u.peakRSS)
        milliseconds.append(ms)
        if u.status != 0 { failures += 1 }
    }
}
