import Foundation
import HalcyonHosts
import HalcyonQueue
import HalcyonRuntime
import HalcyonSamples
import HalcyonTestSupport
import Testing

/// `halcyon bench` runs end to end (speed is reported by the command, never asserted).
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, binary)"), .processes(2))
struct BenchCommandTests {
    @Test func benchRunsW1AndWritesItsResults() async throws {
        let db = try await TestDatabase.create()
        let home = try TestEnvironment.temporaryDirectory("bench-home")
        let out = home.appendingPathComponent("results.json")
        // Q on two small photographs of its own (the repository's, at 800 pixels, cost a minute).
        let qImages = home.appendingPathComponent("q-images")
        try FileManager.default.createDirectory(at: qImages, withIntermediateDirectories: true)
        for seed in [3, 4] {
            try SampleImages.photo(width: 240, height: 160, seed: UInt64(seed)).write(to: qImages.appendingPathComponent("q\(seed).jpg"))
        }
        let bench = try HalcyonProcess(
            ["bench", "--scale", "0.01", "--repeat", "1", "--no-peers", "--q-images", qImages.path, "--out", out.path],
            conninfo: db.conninfo, environment: ["HALCYON_HOME": home.path])
        // P adds about 45 s: a picture set and the ladder's quality search on a 4032×3024 JPEG.
        #expect(await bench.wait(timeout: 360) == 0, "\(bench.output.suffix(2000))")
        let json = try #require(JSONValue.parse(String(decoding: try Data(contentsOf: out), as: UTF8.self)))
        #expect(json["scenario"]?.stringValue == "W1")
        // Q: the two images, every fixed quality and each automatic chain scored.
        #expect(json["Q"]?["images"]?.arrayValue?.count == 2, "\(json["Q"] ?? .null)")
        #expect((json["Q"]?["auto"]?.arrayValue ?? []).allSatisfy { $0["scores"]?.arrayValue?.count == 2 })
        #expect(json["Q"]?["auto"]?.arrayValue?.isEmpty == false)
        // P: Q's two images and one of the corpus's 4032×3024 JPEGs, each as a picture set and as
        // the fixed ladder (capped at the image's width), with a quality per format.
        let pImages = try #require(json["P"]?["images"]?.arrayValue, "\(json["P"] ?? .null)")
        #expect(pImages.count == 3)
        #expect(pImages.last?["ladder_widths"]?.arrayValue?.compactMap(\.numberValue) == [320, 640, 960, 1280, 1600])
        #expect(pImages.first?["ladder_widths"]?.arrayValue?.compactMap(\.numberValue) == [240])
        #expect(pImages.allSatisfy { ($0["set"]?["jpeg"]?["total_bytes"]?.numberValue ?? 0) > 0 && ($0["ladder_cpu_seconds"]?.numberValue ?? 0) > 0 })
        #expect(["avif", "webp", "jpeg"].allSatisfy { (json["P"]?["ladder_quality"]?[$0]?.numberValue ?? 0) >= 1 })
        #expect(json["P"]?["totals"]?["all"]?["fetches"]?.arrayValue?.count == 8)
        #expect(bench.output.contains("P — picture sets: breakpoints("))
        // W3: the two effect chains, measured.
        #expect(json["W3"]?["chains"]?.arrayValue?.count == 2)
        #expect((json["W3"]?["results"]?.arrayValue?.first?["sources_per_second_median"]?.numberValue ?? 0) > 0, "\(json["W3"] ?? .null)")
        #expect(json["corpus"]?["images"]?.numberValue == 3)  // one of each kind: 1080p JPEG, 12 MP JPEG, PNG with alpha
        #expect((json["H"]?["jobs_per_second_median"]?.numberValue ?? 0) > 0)
        #expect((json["W2"]?["results"]?.arrayValue?.first?["sources_per_second_median"]?.numberValue ?? 0) > 0)
        #expect(json["W2"]?["chains"]?.arrayValue?.count == 3)
        let lp50 = try #require(json["L"]?["p50_ms"]?.numberValue), lp99 = try #require(json["L"]?["p99_ms"]?.numberValue)
        #expect(lp50 > 0 && lp50 <= lp99)
        // S at --scale 0.01: backlogs of 1,000 and 10,000 queued jobs, then 10,000 over 100 fair
        // keys, two workers' throughput through each, and each hot statement timed.
        let scaleRuns = try #require(json["S"]?["runs"]?.arrayValue)
        #expect(scaleRuns.compactMap { $0["queued"]?.numberValue } == [1000, 10_000, 10_000])
        #expect(scaleRuns.compactMap { $0["fair_keys"]?.numberValue } == [0, 0, 100])
        #expect(scaleRuns.allSatisfy { ($0["rows"]?.numberValue ?? 0) > ($0["queued"]?.numberValue ?? 0) })
        #expect(scaleRuns.allSatisfy { ($0["jobs_per_second"]?.numberValue ?? 0) > 0 })
        #expect((json["S"]?["throughput_ratio"]?.numberValue ?? 0) > 0)
        for run in scaleRuns {
            let claim = try #require(run["statements"]?.arrayValue?.first { $0["name"]?.stringValue == "claim 6" })
            let p50 = claim["p50_ms"]?.numberValue ?? 0, p99 = claim["p99_ms"]?.numberValue ?? 0
            #expect(p50 > 0 && p50 <= p99 && (claim["samples"]?.numberValue ?? 0) > 0)
            // Prepared as a worker's, then the claim unprepared and with the server's settings.
            #expect(run["statements"]?.arrayValue?.count == 11, "\(run)")
            #expect(run["statements"]?.arrayValue?.contains { $0["name"]?.stringValue == "claim 6, unprepared" } == true)
        }
        // The bench leaves no backlog behind.
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE cache_key LIKE 'halcyon-bench:backlog-%'").value(0, "n") == "0")
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.fair_turns WHERE fair_key LIKE 'tenant-%'").value(0, "n") == "0")
        let halcyon = try #require(json["results"]?.arrayValue?.first)
        #expect(halcyon["tool"]?.stringValue == "halcyon")
        #expect((halcyon["images_per_second_median"]?.numberValue ?? 0) > 0)
        #expect((halcyon["peak_rss_bytes"]?.numberValue ?? 0) > 1_000_000)
        // PostgreSQL's CPU over the run, found by its socket (the bench may read its processes as
        // root). A run this small may cost the database less than a clock tick (10 ms): reported,
        // possibly 0, and never more than the whole.
        if getuid() == 0 {
            let database = try #require(halcyon["database_cpu_ms_per_image"]?.numberValue, "\(halcyon)")
            let together = try #require(halcyon["cpu_ms_per_image_with_database"]?.numberValue)
            #expect(database >= 0 && together > 0 && together >= database, "\(halcyon)")
            #expect(bench.output.contains("halcyon and PostgreSQL:"))
        }
        let p50 = try #require(halcyon["ms_per_image_p50"]?.numberValue), p95 = try #require(halcyon["ms_per_image_p95"]?.numberValue)
        #expect(p50 > 0 && p50 <= p95)
        // The quality guard's sample (one image of each kind here) against the full-decode reference.
        #expect((halcyon["psnr_db"]?.numberValue ?? 0) > 30)
        #expect(json["quality_guard"]?["passed"]?.boolValue == true)
        #expect(json["quality_guard"]?["samples"]?.numberValue == 3)
        // The chart beside the JSON is a PNG.
        let chart = try Data(contentsOf: out.deletingPathExtension().appendingPathExtension("png"))
        #expect(chart.starts(with: [0x89, 0x50, 0x4E, 0x47]) && chart.count > 5000)
        #expect(bench.output.contains("W1 — resize(320x320, mode=fill)"))
        #expect(bench.output.contains("H — store hits:") && bench.output.contains("L — enqueue→start"))
        // E: blur and sharpen against ImageMagick's 2-D kernels, each measured and compared.
        let effects = try #require(json["E"]?.arrayValue)
        #expect(effects.compactMap { $0["step"]?.stringValue } == ["blur(2)", "blur(8)", "sharpen(1)", "sharpen(4)"])
        #expect(effects.allSatisfy { ($0["halcyon_ms"]?.numberValue ?? 0) > 0 && ($0["psnr_db"]?.numberValue ?? 0) > 40 })
    }

    @Test func soakReportsThroughputAndRSSPerTenth() async throws {
        let db = try await TestDatabase.create()
        let home = try TestEnvironment.temporaryDirectory("bench-home")
        let out = home.appendingPathComponent("results.json")
        let bench = try HalcyonProcess(
            ["bench", "--soak", "1000", "--no-peers", "--out", out.path], conninfo: db.conninfo, environment: ["HALCYON_HOME": home.path])
        #expect(await bench.wait(timeout: 300) == 0, "\(bench.output.suffix(2000))")
        let json = try #require(JSONValue.parse(String(decoding: try Data(contentsOf: out), as: UTF8.self)))
        // Only the soak ran.
        #expect(json["S"] == nil && json["H"] == nil)
        let soak = try #require(json["soak"])
        #expect(soak["jobs"]?.numberValue == 1000)
        #expect(soak["finished"]?.numberValue == 1000, "\(soak)")
        let tenths = try #require(soak["tenths"]?.arrayValue)
        #expect(tenths.compactMap { $0["tenth"]?.numberValue } == (1...10).map(Double.init))
        #expect(tenths.allSatisfy { ($0["jobs_per_second"]?.numberValue ?? 0) > 0 && ($0["worker_rss_bytes"]?.numberValue ?? 0) > 1_000_000 })
        // Each worker's tree, its supervisor and its image process apart, in every tenth.
        for tenth in tenths {
            let workers = try #require(tenth["workers"]?.arrayValue)
            #expect(workers.count == 2, "\(tenth)")
            for key in ["supervisor_rss_bytes", "image_rss_bytes", "supervisor_peak_rss_bytes", "image_peak_rss_bytes"] {
                #expect(workers.allSatisfy { ($0[key]?.numberValue ?? 0) > 1_000_000 }, "\(key): \(tenth)")
            }
        }
        #expect(soak["image_growth"]?.arrayValue?.count == 2)
        #expect(soak["image_restarts"]?.arrayValue?.compactMap(\.numberValue) == [0, 0])
        #expect(soak["workload"]?.stringValue?.contains("12 sources of 4 formats") == true)
        #expect(bench.output.contains("Soak — 1000 queued jobs"), "\(bench.output.suffix(2000))")
        #expect(bench.output.contains("w1 sup  w1 image  w1 peak") && bench.output.contains("worker 2's image process"))
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.jobs").value(0, "n") == "0")
    }

    /// `halcyon bench --only X` at the smallest scale, with `options`, on a database of its own
    /// and a prefix of the test bucket: the database, the bench and where its JSON goes.
    static func startX(_ options: [String]) async throws -> (TestDatabase, HalcyonProcess, URL) {
        let db = try await TestDatabase.create()
        let home = try TestEnvironment.temporaryDirectory("bench-home")
        let out = home.appendingPathComponent("results.json")
        let bench = try HalcyonProcess(
            ["bench", "--only", "X"] + options + [
                "--scale", "0.01", "--repeat", "1", "--no-peers", "--worker-concurrency", "2", "--out", out.path, "--object-store",
                TestEnvironment.s3StoreURL(prefix: "bench-x-\(db.name)"),
            ], conninfo: db.conninfo, environment: TestEnvironment.s3Environment.merging(["HALCYON_HOME": home.path]) { $1 })
        return (db, bench, out)
    }

    /// X: W1's jobs drained by one host, then two (network namespaces reaching PostgreSQL and the
    /// S3 server over veth links), each run's jobs all 320×320 JPEGs in the bucket (the bench
    /// checks), both rates and their ratio reported; the hosts and their jobs gone after.
    @Test(
        .enabled(if: TestEnvironment.s3Available, "needs scripts/test's S3 server"),
        .enabled(if: NetworkHosts.unavailableReason == nil, Comment(rawValue: NetworkHosts.unavailableReason ?? "")), .processes(3))
    func acrossHostsReportsOneAndTwoHosts() async throws {
        let (db, bench, out) = try await Self.startX([])
        #expect(await bench.wait(timeout: 180) == 0, "\(bench.output.suffix(3000))")
        #expect(bench.output.contains("X — across hosts"), "\(bench.output.suffix(3000))")
        #expect(bench.output.contains("2 hosts against 1:"))
        let json = try #require(JSONValue.parse(String(decoding: try Data(contentsOf: out), as: UTF8.self)))
        let x = try #require(json["X"], "\(bench.output.suffix(2000))")
        let runs = try #require(x["runs"]?.arrayValue)
        #expect(runs.compactMap { $0["hosts"]?.numberValue } == [1, 2])
        #expect(runs.allSatisfy { ($0["jobs"]?.numberValue ?? 0) > 0 && ($0["seconds"]?.numberValue ?? 0) > 0 })
        #expect((x["one_host_jobs_per_second_median"]?.numberValue ?? 0) > 0 && (x["two_hosts_jobs_per_second_median"]?.numberValue ?? 0) > 0)
        #expect((x["ratio"]?.numberValue ?? 0) > 0)
        // Only X ran; its jobs are deleted and no host is left.
        #expect(json["H"] == nil && json["L"] == nil)
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.jobs").value(0, "n") == "0")
        let pid = bench.pid
        let namespaces = try #require(KernelFile.text("/proc/net/dev"))
        #expect(!namespaces.contains("hc\(pid)a"), "the bench's veth pairs are removed")
    }

    /// X with `--host-cpus`: 1, 2 and 4 hosts, each host's worker in a CPU cgroup of its own;
    /// the ratios and each host's CPU reported; no cgroup, namespace or job left after.
    @Test(
        .enabled(if: TestEnvironment.s3Available, "needs scripts/test's S3 server"),
        .enabled(if: NetworkHosts.unavailableReason == nil, Comment(rawValue: NetworkHosts.unavailableReason ?? "")),
        .enabled(if: CPUCgroup.unavailableReason == nil, Comment(rawValue: CPUCgroup.unavailableReason ?? "")), .processes(3))
    func acrossCappedHostsReportsOneTwoAndFourHosts() async throws {
        let (db, bench, out) = try await Self.startX(["--host-cpus", "0.5"])
        #expect(await bench.wait(timeout: 300) == 0, "\(bench.output.suffix(3000))")
        #expect(bench.output.contains("each host's worker in a CPU cgroup capped at 0.50 cores"), "\(bench.output.suffix(3000))")
        #expect(bench.output.contains("2 hosts against 1:") && bench.output.contains("4 hosts against 1:"))
        let json = try #require(JSONValue.parse(String(decoding: try Data(contentsOf: out), as: UTF8.self)))
        let x = try #require(json["X"], "\(bench.output.suffix(2000))")
        let runs = try #require(x["runs"]?.arrayValue)
        #expect(runs.compactMap { $0["hosts"]?.numberValue } == [1, 2, 4])
        #expect(x["host_cpus"]?.numberValue == 0.5)
        #expect((x["ratio"]?.numberValue ?? 0) > 0 && (x["ratio_4"]?.numberValue ?? 0) > 0)
        // Every host's CPU accounted for, and none above its cap (a period's slack).
        for run in runs {
            let hosts = Int(run["hosts"]?.numberValue ?? 0)
            let used = try #require(run["host_cpu_seconds"]?.arrayValue).compactMap(\.numberValue)
            #expect(used.count == hosts && used.allSatisfy { $0 > 0 }, "\(run)")
            let seconds = run["process_seconds"]?.numberValue ?? 0
            #expect(used.allSatisfy { $0 <= 0.5 * seconds + 0.2 }, "\(run)")
        }
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.jobs").value(0, "n") == "0")
        let pid = bench.pid
        for root in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"] {
            let left = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).filter { $0.hasPrefix("hc-\(pid)-") }
            #expect(left.isEmpty, "the bench's cgroups are removed: \(root) \(left)")
        }
        #expect(!(KernelFile.text("/proc/net/dev") ?? "hc\(pid)a").contains("hc\(pid)a"), "the bench's veth pairs are removed")
    }

    /// A `--host-cpus` no host could have is refused before anything runs, saying what is allowed.
    @Test func benchRefusesHostCPUsOutOfRange() async throws {
        let home = try TestEnvironment.temporaryDirectory("bench-home")
        for value in ["0", "0.01", "1000"] {
            let bench = try HalcyonProcess(
                ["bench", "--only", "X", "--host-cpus", value, "--object-store", "s3://bench/x"], conninfo: "host=/nonexistent",
                environment: ["HALCYON_HOME": home.path])
            #expect(await bench.wait(timeout: 60) != 0)
            #expect(bench.output.contains("--host-cpus must be from 0.05 to "), "\(bench.output.suffix(1000))")
        }
        let bench = try HalcyonProcess(
            ["bench", "--only", "W1", "--host-cpus", "0.5"], conninfo: "host=/nonexistent", environment: ["HALCYON_HOME": home.path])
        #expect(await bench.wait(timeout: 60) != 0)
        #expect(bench.output.contains("--host-cpus caps X's hosts: X must run"), "\(bench.output.suffix(1000))")
    }

    @Test func benchRefusesADatabaseWithOtherJobs() async throws {
        let db = try await TestDatabase.create()
        try await db.query("SELECT halcyon.enqueue('https://example.com/a.jpg')")
        let home = try TestEnvironment.temporaryDirectory("bench-home")
        let bench = try HalcyonProcess(
            ["bench", "--scale", "0.01", "--repeat", "1", "--no-peers"],
            conninfo: db.conninfo, environment: ["HALCYON_HOME": home.path])
        #expect(await bench.wait(timeout: 300) != 0)
        #expect(bench.output.contains("not the bench's"))
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.jobs").value(0, "n") == "1")
    }
}
