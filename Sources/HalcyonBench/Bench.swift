import ArgumentParser
import Dispatch
import Foundation
import HalcyonCLI
import HalcyonChain
import HalcyonDomain
import HalcyonEmbedded
import HalcyonHosts
import HalcyonImage
import HalcyonQueue
import HalcyonRuntime
import HalcyonSamples
import HalcyonStore

package struct Bench: AsyncParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        // The name a user types: `halcyon bench` runs this program (`halcyon-bench`).
        commandName: "halcyon bench",
        abstract:
            "Measure W1, W2, W3, H, L, S, N, E and X end to end through the queue, beside Pillow, vipsthumbnail, convert and pgqueuer, and Q and P in-process; or soak.",
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
            allows, one thread), one process per image, --concurrency at a time. W1 also runs \
            as "halcyon +placeholders": the same jobs with a BlurHash, a ThumbHash and the \
            dominant colour asked for, and as "halcyon +pdq": with every source's perceptual hash.

            W2: every source → three variants (the W1 chain, a 1024 fit WebP q80, a 64 fill PNG), \
            beside Pillow and tuned convert decoding once per source.

            W3: every source → two effect chains (blur, rounded corners, overlay → PNG; sharpen, \
            colour controls → WebP), beside Pillow and tuned convert.

            W1 and W2 have a decode-floor row: the corpus only decoded, in-process, at the scale \
            Halcyon decodes it (scripts/bench-peers-setup installs the peers).

            H: the W1 jobs again, copied to about 5,000, on the store W1 filled: store-hit jobs/s, \
            beside pgqueuer draining as many no-op jobs (batch 10 and 250) on the same PostgreSQL.

            L: an idle worker; 40 small jobs enqueued 50 ms apart; enqueue→start p50/p95/p99.

            E: blur and sharpen against ImageMagick's 2-D kernels, and the front-end steps' CPU per \
            image (a fill with gravity entropy and attention against the centre, W1 with \
            placeholders), in-process, one thread.

            S: the queue with a backlog of 10k, 100k and 1M queued jobs (× --scale), in a table as \
            hours of work leave it (history pruned and vacuumed, the backlog's rows scattered \
            through the heap, claims rescued and released, several queues, priorities, delayed \
            and retried jobs), on the database's own settings: two `halcyon work` processes work \
            through it for a while, the table is analyzed, and their throughput over the next \
            5,000 jobs is measured; then each hot statement's latency alone (p50/p99: claim, \
            heartbeat, complete, fail, release, rescue, webhook take, the dashboard's overview). \
            The 1M backlog takes about a minute to write. Then the burst shape: 100k and 1M jobs \
            (× --scale) inserted in one statement into a quiet table and two workers started at \
            once, their throughput over the first 10, 30 and 60 s, against the same burst with an \
            ANALYZE before the start (--repeat rounds each).

            N: 1,000,000 recorded perceptual hashes (× --scale; jobs that hashed their sources: \
            100,000 originals, each with nine copies 1–30 bits away), vacuumed and analyzed; then \
            near-duplicate lookups through halcyon.similar_images, as an application asks before \
            processing an upload (three in four a new copy of a recorded original, the rest \
            unrelated): p50/p99 at 15, 31 and 47 bits, and recall at 31 bits against a scan of \
            every row. Writing the hashes takes a minute or two.

            X (across hosts; only with --object-store, as root where `ip netns` works, with \
            python3): W1's jobs, copied to about 1,000 (× --scale), drained by one host's worker, \
            then by two hosts' workers at once; each host is a Linux network namespace reaching \
            PostgreSQL and the S3 endpoint (which must be http:// in this machine's root \
            namespace) only over a veth link, through TCP forwarders. Jobs/s from first claim to \
            last completion for 1 and 2 hosts, and the ratio. Both hosts share this machine's \
            cores: a CPU-bound run is about 1× here. With --host-cpus F, each host's worker runs \
            in a CPU cgroup of its own capped at F cores (cgroup v1 cpu.cfs_quota_us, or v2 \
            cpu.max), so that the hosts, not the machine, are the limit: 1, 2 and 4 hosts, the \
            ratios against one, and the CPU each host used.

            Q (quality, in-process, no database): the repository's public photographs and \
            screenshots (or --q-images; × --scale below 1, at least 2) through resize(800x800, mode=fit); every fixed JPEG quality \
            75–100 scored by SSIMULACRA2; T = q82's score on the median image; then \
            format(jpeg, quality=auto, min_score=T), format(auto, min_score=T), when AVIF \
            encodes format(auto, min_score=T, formats=jpeg|webp), and format(jxl, quality=auto, \
            min_score=T), each interleaved with a q82 job: bytes, scores, encodes and time against \
            q82's, and each output scored again by the PyPI ssimulacra2 package when a Python has \
            it; last, each JPEG source recompressed as JPEG XL (format(jxl, lossless=true)).

            P (picture sets, in-process, no database, one thread): Q's images and the first 5 \
            (× --scale, at least 1) of the corpus's 4032×3024 JPEGs (made alone when missing) \
            through breakpoints() at its defaults (320 to 1600 px, bytes_step=20000, \
            max_images=8, formats=avif|webp|jpeg, min_score=80), against a fixed ladder: 320, \
            640, 960, 1280 and 1600 px (capped at the image's width), resize(Wx16384) |> \
            format(F, quality=Q) in AVIF, WebP and JPEG, at the lowest quality per format that \
            holds SSIMULACRA2 ≥ 80 on every rung of every image (a bisection over 1–100), and at \
            each image's own lowest. Rungs and bytes per format; the bytes a visitor fetches at \
            viewports 360, 768, 1280 and 1920 px at DPR 1 and 2 (sizes=100vw), in AVIF and in \
            JPEG; the CPU of a set against a ladder's encodes.

            --soak N: N queued jobs (the same backlog, none delayed) drained by two workers, with \
            throughput and the workers' RSS per tenth of the run: a slowdown or a leak shows as a \
            column going the wrong way. With --soak, only the soak runs unless --only names more.

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
    @Option(name: .customLong("concurrency"), help: "Parallel processes for the peers, threads for the decode floor. Default: cores.")
    var concurrencyOption: Int?
    /// No default value in the declaration: help text must not depend on the machine it runs on.
    var concurrency: Int { concurrencyOption ?? ProcessInfo.processInfo.activeProcessorCount }
    @Option(help: "Processing slots for Halcyon's worker. Default: the worker's own (cores + 1).")
    var workerConcurrency: Int?
    @Flag(help: "Skip the peers (Pillow, vipsthumbnail, convert).")
    var noPeers = false
    @Flag(help: "Skip S (the queue with 10k, 100k and 1M queued jobs; writing the 1M backlog takes a minute).")
    var noScale = false
    @Option(help: "Soak: drain this many queued jobs with two workers, reporting throughput and RSS per tenth (1000–10000000).")
    var soak: Int?
    @Option(help: "Run the workers from this halcyon executable instead of the one beside halcyon-bench (to compare two builds in one run).")
    var workerBinary: String?

    /// What the bench's `halcyon work` processes run.
    var workerExecutable: String { workerBinary ?? Sibling.halcyon }
    @Option(
        help: ArgumentHelp(
            "Also run W1 and H with the store in this bucket, s3://BUCKET[/PREFIX], beside the disk store's runs, and X.",
            discussion: "The AWS variables configure it (see `halcyon work --help`); each run writes under PREFIX/bench-PID-N/ and deletes it after.")
    )
    var objectStore: String?
    @Option(
        help: ArgumentHelp(
            "Q's images: JPEG and PNG files in these directories.",
            discussion:
                "Default: the repository's Tests/Fixtures/public/photos and Tests/Fixtures/screenshots, found from the executable or the current directory."
        ))
    var qImages: [String] = []
    @Option(
        name: .customLong("host-cpus"),
        help: ArgumentHelp(
            "X: cap each host's worker at this many cores (a CPU cgroup per host) and run 1, 2 and 4 hosts.",
            discussion: "From 0.05 to this machine's CPUs. Needs root and a writable CPU cgroup (v1 or v2); refused with the reason otherwise.")
    )
    var hostCPUs: Double?
    @Option(help: "Write the results as JSON here (default $HALCYON_HOME/bench/results.json).")
    var out: String?
    @Option(
        parsing: .upToNextOption,
        help: "Run only these scenarios (W1 W2 W3 H L S E X Q P N; H needs W1's store, so it runs W1 too). Default: all.")
    var only: [Scenario] = []

    /// The scenarios, for `--only`.
    enum Scenario: String, CaseIterable, ExpressibleByArgument {
        case w1 = "W1", w2 = "W2", w3 = "W3", h = "H", l = "L", s = "S", e = "E", x = "X", q = "Q", p = "P", n = "N"
        init?(argument: String) { self.init(rawValue: argument.uppercased()) }
    }

    /// Whether `scenario` runs (`--only`, and S also needs no `--no-scale`; with `--soak`, none
    /// but those `--only` names).
    func runs(_ scenario: Scenario) -> Bool {
        if scenario == .s, noScale { return false }
        if only.isEmpty { return soak == nil }
        return only.contains(scenario) || (scenario == .w1 && only.contains(.h))
    }

    static let chain = "resize(320x320, mode=fill) |> format(jpeg, quality=82)"
    /// W2: three variants of every source (decoded once when the three share a claim).
    static let variants = [chain, "resize(1024x1024, mode=fit) |> format(webp, quality=80)", "resize(64x64, mode=fill) |> format(png)"]
    /// W3: effects, two chains per source.
    static let effectChains = [
        "resize(800x800) |> blur(2) |> round_corner(24) |> overlay(#000000, fraction=0.8) |> format(png)",
        "resize(640x640, mode=fill) |> sharpen(1) |> color_controls(contrast=1.2, saturation=1.3) |> format(webp, quality=80)",
    ]

    /// W1's Halcyon row with the store in a bucket (`--object-store`).
    static let objectStoreTool = "halcyon s3 store"
    /// W1's second Halcyon row: the same jobs with every placeholder.
    static let placeholdersTool = "halcyon +placeholders"
    static let placeholderOptions = #"{"placeholders": ["blurhash", "thumbhash", "dominant_color"]}"#
    /// W1's Halcyon row with every source's perceptual hash (PDQ) asked for.
    static let hashedTool = "halcyon +pdq"
    static let hashOptions = #"{"perceptual_hash": true}"#
    /// W1's third Halcyon row: the same jobs with tracing on, every span exported to a local
    /// collector stand-in (`OTLPSink`) every 100 ms.
    static let tracedTool = "halcyon +tracing"

    package func validate() throws {
        guard scale > 0, scale <= 10 else { throw ValidationError("--scale must be in (0, 10]") }
        guard (1...20).contains(repeats) else { throw ValidationError("--repeat must be 1…20") }
        guard (1...256).contains(concurrency) else { throw ValidationError("--concurrency must be 1…256") }
        if let w = workerConcurrency, !(1...256).contains(w) { throw ValidationError("--worker-concurrency must be 1…256") }
        if let n = soak, !(1000...10_000_000).contains(n) { throw ValidationError("--soak must be 1000…10000000 jobs") }
        if let objectStore {
            do {
                guard case .objectStore = try StoreLocation(parsing: objectStore) else {
                    throw ValidationError("--object-store takes s3://BUCKET[/PREFIX]")
                }
            } catch let error as HalcyonError {
                throw ValidationError("--object-store: \(error.message)")
            }
        }
        if let hostCPUs {
            if let problem = Self.hostCPUsProblem(hostCPUs, cpus: ProcessInfo.processInfo.activeProcessorCount) {
                throw ValidationError(problem)
            }
            guard runs(.x) else { throw ValidationError("--host-cpus caps X's hosts: X must run (--only X, or no --only)") }
            guard objectStore != nil else { throw ValidationError("--host-cpus caps X's hosts: X needs --object-store s3://BUCKET[/PREFIX]") }
        }
        if let path = workerBinary, !FileManager.default.isExecutableFile(atPath: path) {
            throw ValidationError("--worker-binary '\(path)' is not an executable file")
        }
    }

    /// Why `cores` cannot be `--host-cpus` on a machine of `cpus` CPUs, or nil.
    static func hostCPUsProblem(_ cores: Double, cpus: Int) -> String? {
        guard cores.isFinite, cores >= 0.05, cores <= Double(cpus) else {
            return "--host-cpus must be from 0.05 to \(cpus) (this machine's CPUs), not \(cores.formatted(.number))"
        }
        return nil
    }

    package func run() async throws {
        // X's hosts capped: refused before anything is built when no CPU cgroup can be made here.
        if hostCPUs != nil {
            if let reason = CPUCgroup.unavailableReason { throw CommandFailure("--host-cpus: \(reason)") }
            if let reason = NetworkHosts.unavailableReason ?? TCPForwarder.unavailableReason {
                throw CommandFailure("--host-cpus: X cannot run here: \(reason)")
            }
        }
        let home = EmbeddedCluster.defaultHome().appendingPathComponent("bench")
        let scratch = home.appendingPathComponent("scratch")
        // The database before anything else: one holding jobs that are not the bench's is
        // refused before minutes of Q, corpus and decodes.
        let usesDatabase = [Scenario.w1, .w2, .w3, .h, .l, .x, .s, .n].contains(where: runs) || soak != nil
        let checked = usesDatabase ? try await benchDatabase() : nil
        if let checked {
            let c = try await PGConnection.connect(checked)
            do { try await Self.ensureOnlyBenchJobs(c) } catch {
                await c.close()
                throw error
            }
            await c.close()
        }
        // Q runs in-process, first, alone on the machine.
        let qRun = runs(.q) ? try await runQ() : nil
        if let qRun { print(qRun.table) }
        // P too, in-process, alone (it makes the few corpus images it takes when they are missing).
        let pRun = runs(.p) ? try await runPictureSets(home: home) : nil
        if let pRun { print(pRun.table) }
        // S, N, the soak, Q and P need no generated corpus.
        guard [Scenario.w1, .w2, .w3, .h, .l, .e, .x].contains(where: runs) else {
            try await runQueueOnly(home: home, scratch: scratch, conninfo: checked, q: qRun, p: pRun)
            return
        }
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

        let conninfo: String
        if let checked { conninfo = checked } else { conninfo = try await benchDatabase() }
        var measured: [BenchPeers.Scenario: [String: [BenchRun]]] = [:]  // scenario → tool → runs
        var hitRuns: [HitRun] = []
        var objectHitRuns: [HitRun] = []
        var pgqueuerRuns: [Int: [HitRun]] = [:]
        let pgqueuer = noPeers ? nil : BenchPeers.pgqueuerScript()
        if !noPeers, pgqueuer == nil { print("peer skipped: no pgqueuer/asyncpg for python3 (run scripts/bench-peers-setup)") }
        var latencyRuns: [LatencyRun] = []
        var hostsRuns: [HostsRun] = []
        var hosts: HostsSetup?
        var signals: SignalForwarder?
        if runs(.x) {
            if let reason = acrossHostsUnavailable(conninfo: conninfo) {
                if hostCPUs != nil { throw CommandFailure("--host-cpus: X cannot run here: \(reason)") }
                print("X skipped: \(reason)")
            } else {
                let setup = try await startHosts(conninfo: conninfo, scratch: scratch)
                hosts = setup
                // Interrupted (Ctrl-C, a TERM): the hosts' workers (each in a session of its
                // own, which a terminal's ^C does not reach), their namespaces and their cgroups
                // go before the bench does.
                signals = SignalForwarder(signals: [SIGINT, SIGTERM]) {
                    setup.stop()
                    Glibc.exit(130)
                }
            }
        }
        defer {
            signals?.cancel()
            hosts?.stop()
        }
        for round in 1...repeats {
            func record(_ scenario: BenchPeers.Scenario, _ tool: String, _ run: BenchRun) {
                measured[scenario, default: [:]][tool, default: []].append(run)
                let line = scenario == .w1 ? run.line : run.line.replacingOccurrences(of: "image", with: "source")
                print("round \(round): \(scenario.label) \(tool) \(line)")
            }
            if runs(.w1) {
                let (h, measuredHits) = try await runHalcyon(corpus, conninfo: conninfo, scratch: scratch, quality: quality)
                guard let hits = measuredHits else { throw CommandFailure("H was not measured") }
                record(.w1, "halcyon", h)
                hitRuns.append(hits)
                // The same W1 with every placeholder asked for (#18: within 10 % of W1 without).
                record(
                    .w1, Self.placeholdersTool,
                    try await runHalcyon(
                        corpus, conninfo: conninfo, scratch: scratch, quality: quality, options: Self.placeholderOptions, hits: false
                    ).w1)
                // The same W1 with every source's PDQ hash (the issue's bar: under 5 % of a job's CPU).
                record(
                    .w1, Self.hashedTool,
                    try await runHalcyon(corpus, conninfo: conninfo, scratch: scratch, quality: quality, options: Self.hashOptions, hits: false).w1)
                // The same W1 with every job's spans exported (the issue's bar: ≤ 3 % more CPU per image).
                let sink = try OTLPSink()
                defer { sink.stop() }
                record(
                    .w1, Self.tracedTool,
                    try await runHalcyon(
                        corpus, conninfo: conninfo, scratch: scratch, quality: quality, hits: false,
                        environment: ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": sink.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"]
                    ).w1)
                let taken = sink.taken
                print("round \(round): W1 traced: \(taken.requests) exports, \(taken.bytes / 1024) KiB of spans taken")
                print("round \(round): H \(hits.line)")
                if let objectStore {
                    let (w1, objectHits) = try await runHalcyon(
                        corpus, conninfo: conninfo, scratch: scratch, quality: quality, bucket: "\(objectStore)/bench-\(getpid())-\(round)")
                    record(.w1, Self.objectStoreTool, w1)
                    if let objectHits {
                        objectHitRuns.append(objectHits)
                        print("round \(round): H (S3 store) \(objectHits.line)")
                    }
                }
                if let pgqueuer, let peerDatabase = try await pgqueuerDatabase() {
                    for batch in [10, HitRun.halcyonBatch] {
                        let r = try await BenchPeers.pgqueuer(
                            pgqueuer, database: peerDatabase, jobs: hits.jobs, batch: batch, log: scratch.appendingPathComponent("pgqueuer.log"))
                        pgqueuerRuns[batch, default: []].append(r)
                        print("round \(round): H pgqueuer batch \(batch): \(r.line)")
                    }
                }
                record(.w1, BenchFloor.tool, try await BenchFloor.run(corpus, chains: [Self.chain], concurrency: concurrency))
            }
            if let hosts {
                for count in hosts.counts {
                    let r = try await runAcrossHosts(
                        corpus, setup: hosts, hosts: count, copies: acrossHostsCopies(corpus), conninfo: conninfo, scratch: scratch, round: round)
                    hostsRuns.append(r)
                    print("round \(round): X \(r.line)")
                }
            }
            if runs(.w2) {
                record(
                    .w2, "halcyon",
                    try await runVariants(
                        corpus, chains: Self.variants, label: "W2", expected: .w2, conninfo: conninfo, scratch: scratch))
                record(.w2, BenchFloor.tool, try await BenchFloor.run(corpus, chains: Self.variants, concurrency: concurrency))
            }
            if runs(.w3) {
                record(
                    .w3, "halcyon",
                    try await runVariants(
                        corpus, chains: Self.effectChains, label: "W3", expected: .w3, conninfo: conninfo, scratch: scratch))
            }
            if runs(.l) {
                let latency = try await runLatency(corpus, conninfo: conninfo, scratch: scratch)
                latencyRuns.append(latency)
                print("round \(round): L \(latency.line)")
            }
            if let pillow {
                for scenario in BenchPeers.Scenario.allCases where runs(scenario.benchScenario) {
                    // W3 has no draft(): its outputs are as large as a draft would decode.
                    record(scenario, scenario == .w3 ? "pillow" : "pillow draft", try await peers.pillow(pillow, scenario))
                }
            }
            if let vips, runs(.w1) {
                record(.w1, "vipsthumbnail", try await peers.vips(vips))
            }
            if let convert {
                for (tuned, scenario) in [(true, BenchPeers.Scenario.w1), (false, .w1), (true, .w2), (true, .w3)] where runs(scenario.benchScenario) {
                    record(scenario, tuned ? "convert tuned" : "convert naive", try await peers.convert(convert, tuned: tuned, scenario))
                }
            }
        }
        let order = [
            "halcyon", Self.objectStoreTool, Self.placeholdersTool, Self.hashedTool, Self.tracedTool, BenchFloor.tool, "pillow draft", "pillow",
            "vipsthumbnail",
            "convert tuned",
            "convert naive",
        ]
        func summarised(_ scenario: BenchPeers.Scenario) -> [BenchResult] {
            order.compactMap { t in measured[scenario]?[t].map { BenchResult(tool: t, runs: $0) } }
        }
        let results = summarised(.w1), w2Results = summarised(.w2), w3Results = summarised(.w3)
        let scaleRuns = runs(.s) ? try await runScale(conninfo: conninfo, scratch: scratch) : []
        let burstRuns = runs(.s) ? try await runBurst(conninfo: conninfo, scratch: scratch) : []
        let nearDuplicates = runs(.n) ? try await runNearDuplicates(conninfo: conninfo) : nil
        var soakRun: SoakRun?
        if let soak { soakRun = try await runSoak(jobs: soak, conninfo: conninfo, scratch: scratch) }
        let effects: (size: ImageSize, rows: [EffectBench.Row]) = runs(.e) ? try await runEffects(corpus) : (ImageSize(width: 0, height: 0), [])
        let frontEnd = runs(.e) ? try await runFrontEnd(corpus) : []
        if !results.isEmpty {
            print(
                BenchResult.table("W1 — \(Self.chain)", results, unit: "image", count: corpus.files.count, concurrency: concurrency, repeats: repeats)
            )
        }
        if !w2Results.isEmpty {
            print(
                BenchResult.table(
                    "W2 — three variants per source: " + Self.variants.joined(separator: "; "), w2Results, unit: "source",
                    count: corpus.files.count, concurrency: concurrency, repeats: repeats))
        }
        if !w3Results.isEmpty {
            print(
                BenchResult.table(
                    "W3 — effects, two chains per source: " + Self.effectChains.joined(separator: "; "), w3Results, unit: "source",
                    count: corpus.files.count, concurrency: concurrency, repeats: repeats))
        }
        for (results, unit) in [(results, "image"), (w2Results, "source"), (w3Results, "source")] {
            guard let halcyon = results.first(where: { $0.tool == "halcyon" }) else { continue }
            let floor = results.first { $0.tool == BenchFloor.tool }
            let lines = [halcyon.databaseLine(unit: unit, floor: floor), halcyon.stageLine(unit: unit)].compactMap { $0 }
            print(lines.joined(separator: "\n") + "\n")
        }
        let verdict = BenchQuality.verdict(results)
        if let verdict { print(verdict.line + "\n") }
        if !hitRuns.isEmpty { print(HitRun.summary(hitRuns, peers: pgqueuerRuns)) }
        if !objectHitRuns.isEmpty {
            print(HitRun.summary(objectHitRuns).replacingOccurrences(of: "H — store hits", with: "H — store hits, S3 store"), terminator: "")
            print(
                String(
                    format: "    the S3 store's H is %.2f× the disk store's\n",
                    HitRun.medianRate(objectHitRuns) / max(HitRun.medianRate(hitRuns), 1e-9)))
        }
        if !latencyRuns.isEmpty { print(LatencyRun.summary(latencyRuns)) }
        if !hostsRuns.isEmpty { print(HostsRun.summary(hostsRuns, chain: Self.chain)) }
        if !scaleRuns.isEmpty { print(ScaleRun.summary(scaleRuns)) }
        if !burstRuns.isEmpty { print(BurstRun.summary(burstRuns)) }
        if let nearDuplicates { print(nearDuplicates.summary) }
        if let soakRun { print(soakRun.summary) }
        if !effects.rows.isEmpty { print(Self.effectsTable(effects)) }
        if !frontEnd.isEmpty { print(Self.frontEndTable(frontEnd)) }

        var json = BenchResult.json(
            results, corpus: corpus, concurrency: concurrency, chain: Self.chain,
            versions: BenchPeers.versions(convert: convert, vips: vips, pillow: pillow))
        if case .object(var o) = json {
            if !hitRuns.isEmpty { o["H"] = HitRun.json(hitRuns, peers: pgqueuerRuns) }
            if !objectHitRuns.isEmpty { o["H_s3"] = HitRun.json(objectHitRuns) }
            if !latencyRuns.isEmpty { o["L"] = LatencyRun.json(latencyRuns) }
            if !hostsRuns.isEmpty { o["X"] = HostsRun.json(hostsRuns) }
            if !w3Results.isEmpty {
                o["W3"] = ["chains": .array(Self.effectChains.map { .string($0) }), "results": .array(w3Results.map { $0.json(unit: "source") })]
            }
            if !w2Results.isEmpty {
                o["W2"] = ["chains": .array(Self.variants.map { .string($0) }), "results": .array(w2Results.map { $0.json(unit: "source") })]
            }
            if let verdict {
                o["quality_guard"] = [
                    "passed": .bool(verdict.passed), "tolerance_db": .number(BenchQuality.tolerance),
                    "samples": .number(Double(quality.samples.count)),
                ]
            }
            if !scaleRuns.isEmpty { o["S"] = ScaleRun.json(scaleRuns) }
            if !burstRuns.isEmpty { o["S_burst"] = BurstRun.json(burstRuns) }
            if let nearDuplicates { o["N"] = nearDuplicates.json }
            if let soakRun { o["soak"] = soakRun.json }
            if let qRun { o["Q"] = qRun.json }
            if let pRun { o["P"] = pRun.json }
            o["E"] = .array(
                effects.rows.map {
                    [
                        "step": .string($0.step), "halcyon_ms": .number(($0.halcyonMs * 10).rounded() / 10),
                        "two_dimensional_ms": .number(($0.twoDimensionalMs * 10).rounded() / 10),
                        "psnr_db": .number(($0.psnr * 100).rounded() / 100),
                    ]
                })
            o["E_front_end"] = .array(frontEnd.map { ["what": .string($0.what), "cpu_ms": .number(($0.cpuMs * 10).rounded() / 10)] })
            json = .object(o)
        }
        let outURL = URL(fileURLWithPath: out ?? home.appendingPathComponent("results.json").path)
        try Data(json.prettyText.utf8).write(to: outURL)
        print("results: \(outURL.path)")
        let chartURL = outURL.deletingPathExtension().appendingPathExtension("png")
        try BenchChart.make(
            w1: results, w2: w2Results, w3: w3Results, hits: hitRuns, pgqueuer: pgqueuerRuns, corpus: corpus, concurrency: concurrency,
            repeats: repeats
        ).write(to: chartURL)
        print("chart: \(chartURL.path)")
        if let verdict, !verdict.passed {
            throw CommandFailure("quality guard failed: Halcyon's outputs are more than \(BenchQuality.tolerance) dB below ImageMagick's")
        }
    }

    /// S, N, the soak, Q and P alone: their tables, and JSON with keys `S`, `N`, `soak`, `Q` and
    /// `P` (no database for Q and P alone).
    private func runQueueOnly(home: URL, scratch: URL, conninfo: String?, q: QualityBench.Run?, p: PictureSetBench.Run?) async throws {
        var scaleRuns: [ScaleRun] = [], burstRuns: [BurstRun] = []
        var soakRun: SoakRun?
        var nearDuplicates: NearDuplicateRun?
        if let conninfo {
            if runs(.s) {
                scaleRuns = try await runScale(conninfo: conninfo, scratch: scratch)
                burstRuns = try await runBurst(conninfo: conninfo, scratch: scratch)
            }
            if runs(.n) { nearDuplicates = try await runNearDuplicates(conninfo: conninfo) }
            if let soak { soakRun = try await runSoak(jobs: soak, conninfo: conninfo, scratch: scratch) }
        }
        var json: [String: JSONValue] = [:]
        if let q { json["Q"] = q.json }
        if let p { json["P"] = p.json }
        if !scaleRuns.isEmpty {
            print(ScaleRun.summary(scaleRuns))
            json["S"] = ScaleRun.json(scaleRuns)
        }
        if !burstRuns.isEmpty {
            print(BurstRun.summary(burstRuns))
            json["S_burst"] = BurstRun.json(burstRuns)
        }
        if let nearDuplicates {
            print(nearDuplicates.summary)
            json["N"] = nearDuplicates.json
        }
        if let soakRun {
            print(soakRun.summary)
            json["soak"] = soakRun.json
        }
        let outURL = URL(fileURLWithPath: out ?? home.appendingPathComponent("results.json").path)
        try FileManager.default.createDirectory(at: outURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(JSONValue.object(json).prettyText.utf8).write(to: outURL)
        print("results: \(outURL.path)")
    }

    /// pgqueuer's database beside the bench's on the embedded cluster (pgqueuer installs its own
    /// tables); nil, with a note, on a database given with --database-url.
    private func pgqueuerDatabase() async throws -> BenchPeers.PeerDatabase? {
        guard case .embedded(let cluster) = database.target else {
            print("peer skipped: pgqueuer runs only beside the embedded database (it installs tables of its own)")
            return nil
        }
        let admin = try await PGConnection.connect(cluster.conninfo)
        if try await admin.row(BenchSQL.DatabaseExists(database: "halcyon_bench_pgqueuer")) == nil {
            try await admin.run(BenchSQL.CreatePgqueuerDatabase())
        }
        await admin.close()
        return BenchPeers.PeerDatabase(
            host: cluster.socketDirectory.path, port: cluster.port, user: "postgres", database: "halcyon_bench_pgqueuer")
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
            if try await admin.row(BenchSQL.DatabaseExists(database: "halcyon_bench")) == nil {
                try await admin.run(BenchSQL.CreateBenchDatabase())
            }
            await admin.close()
            let conninfo = cluster.conninfo.replacingOccurrences(of: "dbname=postgres", with: "dbname=halcyon_bench")
            let c = try await PGConnection.connect(conninfo)
            try await Migrator.migrate(c, migrations: Migrator.load(from: Migrator.locateDirectory()))
            await c.close()
            return conninfo
        }
    }

}
