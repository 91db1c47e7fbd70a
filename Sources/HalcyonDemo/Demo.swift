import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonDomain
import HalcyonEmbedded
import HalcyonFetch
import HalcyonHTTP
import HalcyonImage
import HalcyonQueue
import HalcyonRuntime
import HalcyonSamples
import HalcyonStore
import HalcyonWorker
import Hummingbird
import Logging
import Synchronization

package struct Demo: AsyncParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        // The name a user types: `halcyon demo` runs this program (`halcyon-demo`).
        commandName: "halcyon demo",
        abstract: "A guided run: sample images, a local origin with faults, two workers, the status.",
        discussion: """
            Generates sample images under $HALCYON_HOME/demo/images (photo-like JPEGs, one with an \
            EXIF rotation, a PNG with alpha, an animated GIF), serves them from a local HTTP origin \
            on 127.0.0.1 and enqueues jobs that show every path: plain downloads, a file:// source, \
            a failing source rescued by its fallback, a 503 that is retried, a cache hit and a \
            permanent failure. Two workers run in this process until every job is finished; then \
            it checks each outcome against what it staged, prints the status and where the outputs \
            are. Uses the embedded database unless one is given; re-runnable (each run uses cache \
            keys of its own, so it processes afresh; identical outputs share one stored object).
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var logging: LoggingOptions
    @Option(help: "Workers to run in parallel.")
    var workers = 2
    @Option(help: ArgumentHelp(Self.timeoutSetting.help))
    var timeout = TimeSpanArgument(Self.timeoutSetting.defaultValue)

    private static let workerCounts = 1...16
    private static let timeoutSetting = Setting.duration("--timeout", default: .seconds(180), .seconds(1)...(.days(1)), "Give up after this long")

    package func validate() throws {
        let counts = Self.workerCounts
        guard counts.contains(workers) else { throw ValidationError("--workers must be \(counts.lowerBound)…\(counts.upperBound)") }
        try timeout.check(Self.timeoutSetting)
    }

    /// A staged job and the outcome it must have.
    struct Staged {
        var name: String
        var job: JobQueue.NewJob
        var expect: Expectation
        var id: Int64 = 0
    }

    enum Expectation { case succeeds, fallback, retriedThenSucceeds, cacheHit, fails(String) }

    package func run() async throws {
        let logger = logging.makeLogger()
        let (connection, conninfo) = try await database.connect()
        let images = EmbeddedCluster.defaultHome().appendingPathComponent("demo/images")
        try Self.generateSamples(in: images)
        print("sample images:  \(images.path)")

        let origin = try await DemoOrigin(directory: images, logger: logger)
        defer { origin.stop() }
        print("local origin:   \(origin.base)  (/images/NAME, /flaky/… answers 503 once, /missing/… is 404)")

        let run = "run-\(Int(Date().timeIntervalSince1970))"
        var staged = Self.stage(origin: origin.base, images: images, run: run)
        let queue = JobQueue(connection: connection)
        // The cache-hit job goes in once the job it repeats has stored its result.
        let later = staged.indices.filter { if case .cacheHit = staged[$0].expect { true } else { false } }
        let first = try await queue.enqueue(batch: staged.indices.filter { !later.contains($0) }.map { staged[$0].job }).map(\.id)
        for (i, id) in zip(staged.indices.filter { !later.contains($0) }, first) { staged[i].id = id }
        print("enqueued:       \(first.count) jobs (\(first.first!)…\(first.last!)), cache keys under demo/\(run)/; one more once the first is done")
        print("workers:        \(workers) in parallel, until every demo job is finished\n")
        fflush(nil)  // before the progress line, which goes to standard error

        let started = Date()
        let progress = ProgressReporter(conninfo: conninfo, expected: staged.count, since: started)
        let store = try storeOptions.location()
        let pool = (1...workers).map { n -> Worker in
            var c = WorkerConfiguration(store: store, workerID: "demo-\(n)-\(getpid())")
            c.fetch.fileRoots = [images.path]
            c.fetch.addressPolicy = AddressPolicy(allowed: [CIDR("127.0.0.1/32")!])
            c.backoff.base = .seconds(1)
            c.pollInterval = .milliseconds(500)
            c.sweepInterval = .zero
            return Worker(configuration: c, conninfo: conninfo, logger: logger)
        }
        let limit = timeout.seconds
        let finished = try await withThrowingTaskGroup(of: Bool.self) { group in
            for worker in pool {
                group.addTask {
                    try await worker.run(); return true
                }
            }
            var ok = await Self.waitForFinish(conninfo: conninfo, ids: [staged[0].id], timeout: limit, logger: logger)
            if ok {
                let more = try await queue.enqueue(batch: later.map { staged[$0].job }).map(\.id)
                for (i, id) in zip(later, more) { staged[i].id = id }
                ok = await Self.waitForFinish(
                    conninfo: conninfo, ids: staged.map(\.id), timeout: limit - Date().timeIntervalSince(started), logger: logger)
            }
            pool.forEach { $0.requestStop() }
            try await group.waitForAll()
            return ok
        }
        await connection.close()
        await progress.finish()
        print(String(format: "\nall demo jobs finished in %.1f s\n", Date().timeIntervalSince(started)))
        guard finished else { throw CommandFailure("the demo jobs did not finish within \(timeout); see `halcyon status`") }

        let (check, _) = try await database.connect()
        let rows = JobQueue(connection: check)
        var mismatches: [String] = []
        print("WHAT HAPPENED")
        for s in staged {
            let r = try await rows.job(id: s.id)
            let (ok, story) = Self.judge(
                s, state: r?.state?.rawValue, attempt: r?.attempt.map { String($0) }, cacheHit: r?.cacheHit == true,
                resultSource: r?.resultSource, lastError: r?.lastError)
            print("  \(ok ? "✔" : "✘") job \(s.id) \(s.name): \(story)")
            if !ok { mismatches.append("job \(s.id) (\(s.name))") }
        }
        let status = try await QueueStatus.load(check)
        await check.close()
        print("\n" + QueueStatusText.render(status))
        print("outputs:   \(try storeOptions.location())/\(StoreLayout.Area.objects.directory)")
        // The halcyon beside this program, so the hint can be pasted as it is (scripts/demo runs
        // .build/release/halcyon demo).
        let me = Sibling.halcyon
        print("look at:   \(me) show \(staged.first { if case .retriedThenSucceeds = $0.expect { true } else { false } }!.id)   (the 503, retried)")
        print("           \(me) show \(staged.first { if case .fails = $0.expect { true } else { false } }!.id)   (the permanent failure)")
        print("           \(me) status --watch")
        guard mismatches.isEmpty else { throw CommandFailure("outcomes differ from what was staged: \(mismatches.joined(separator: ", "))") }
        print("\ndemo: all \(staged.count) outcomes as staged")
        // The same database and store, seen in a browser.
        var again: [String] = []
        if let url = database.databaseURL { again += ["--database-url", "'\(url)'"] }
        if let store = storeOptions.store { again += ["--store", "'\(store)'"] }
        let page = "http://\(HTTPServerSettings.defaultAddress):\(HTTPServerSettings.dashboardPort)/"
        print("\ndashboard: \(([me, "dashboard"] + again).joined(separator: " "))   then open \(page) (Ctrl-C stops it)")
    }

    /// Sample images, generated once (deterministic) and reused.
    /// Writes the sample images `scripts/demo` leaves in `$HALCYON_HOME/demo/images` (the docs' examples use them).
    package static func generateSamples(in images: URL) throws {
        try FileManager.default.createDirectory(at: images, withIntermediateDirectories: true)
        let makers: [(String, () throws -> Data)] = [
            ("landscape.jpg", { try SampleImages.photo(width: 1920, height: 1080, seed: 1) }),
            ("large.jpg", { try SampleImages.photo(width: 4032, height: 3024, seed: 2, quality: 90) }),
            // Stored sideways with EXIF orientation 6: it comes out upright (portrait).
            ("rotated.jpg", { SampleImages.withEXIFOrientation(try SampleImages.photo(width: 1600, height: 1000, seed: 3), 6) }),
            ("badge.png", { try SampleImages.photo(width: 600, height: 400, seed: 4, format: .png, alpha: true) }),
            ("spinner.gif", { try SampleImages.animatedGIF(frames: 12, width: 200, height: 200) }),
        ]
        for (name, make) in makers where !FileManager.default.fileExists(atPath: images.appendingPathComponent(name).path) {
            try make().write(to: images.appendingPathComponent(name), options: .atomic)
        }
    }

    /// The jobs of one run.
    static func stage(origin: String, images: URL, run: String) -> [Staged] {
        func job(_ source: String, _ chain: String, key: String, fallbacks: [String] = [], options: String = "{}") -> JobQueue.NewJob {
            var j = JobQueue.NewJob(source: source)
            j.processors = chain
            j.cacheKey = "demo/\(run)/\(key)"
            j.fallbackSources = fallbacks
            j.options = options
            return j
        }
        let thumb = "resize(320x320, mode=fill) |> format(jpeg, quality=82)"
        let web = "resize(1024x1024) |> format(webp, quality=80)"
        var jobs: [Staged] = []
        for name in ["landscape.jpg", "large.jpg", "rotated.jpg"] {
            jobs.append(Staged(name: "\(name) → 320×320 JPEG", job: job("\(origin)/images/\(name)", thumb, key: name), expect: .succeeds))
            jobs.append(Staged(name: "\(name) → 1024 WebP", job: job("\(origin)/images/\(name)", web, key: name), expect: .succeeds))
        }
        jobs.append(
            Staged(
                name: "badge.png → rounded PNG",
                job: job("\(origin)/images/badge.png", "round_corner(24) |> resize(300x300) |> format(png)", key: "badge.png"), expect: .succeeds))
        jobs.append(
            Staged(
                name: "spinner.gif → 100 px GIF, all frames",
                job: job("\(origin)/images/spinner.gif", "resize(100x100) |> format(gif)", key: "spinner.gif"), expect: .succeeds))
        jobs.append(
            Staged(
                name: "file:// source → black and white",
                job: job("file://" + images.appendingPathComponent("landscape.jpg").path, "black_white |> resize(400x400)", key: "file-landscape"),
                expect: .succeeds))
        jobs.append(
            Staged(
                name: "missing source, fallback serves it",
                job: job(
                    "\(origin)/missing/\(run)/landscape.jpg", "resize(640x640)", key: "fallback",
                    fallbacks: ["\(origin)/images/landscape.jpg"]), expect: .fallback))
        // No download retries for this one, so the 503 fails the attempt and the job itself is retried.
        jobs.append(
            Staged(
                name: "503 once, retried with backoff",
                job: job("\(origin)/flaky/\(run)/large.jpg", "resize(480x480)", key: "flaky", options: #"{"retry": {"max": 0}}"#),
                expect: .retriedThenSucceeds))
        // The same source, chain and cache key as the first job, once that is done: a store hit.
        jobs.append(
            Staged(
                name: "the first job again, once it is done", job: job("\(origin)/images/landscape.jpg", thumb, key: "landscape.jpg"),
                expect: .cacheHit))
        jobs.append(
            Staged(
                name: "a source that does not exist", job: job("\(origin)/missing/\(run)/nothing.jpg", thumb, key: "nothing"),
                expect: .fails("fetch.http_status")))
        return jobs
    }

    /// Whether a job ended as staged, and what happened in words.
    static func judge(_ s: Staged, state: String?, attempt: String?, cacheHit: Bool, resultSource: String?, lastError: String?) -> (Bool, String) {
        let attempts = Int(attempt ?? "") ?? 0
        switch s.expect {
        case .succeeds:
            return (
                state == "succeeded" && !cacheHit,
                state == "succeeded" ? "processed (\(cacheHit ? "store hit" : "downloaded"))" : "\(state ?? "?"): \(lastError ?? "")"
            )
        case .fallback:
            let ok = state == "succeeded" && resultSource == s.job.fallbackSources.first
            return (ok, ok ? "the source failed (HTTP 404), its fallback served it" : "\(state ?? "?") from \(resultSource ?? "?")")
        case .retriedThenSucceeds:
            let ok = state == "succeeded" && attempts == 2 && lastError?.contains("HTTP 503") == true
            return (
                ok,
                ok ? "attempt 1 failed (\(lastError ?? "")), attempt 2 succeeded" : "\(state ?? "?") after \(attempts) attempts: \(lastError ?? "")"
            )
        case .cacheHit:
            return (state == "succeeded" && cacheHit, cacheHit ? "served from the store, no download" : "\(state ?? "?"), not a cache hit")
        case .fails(let code):
            let ok = state == "failed" && attempts == 1 && lastError?.hasPrefix(code) == true
            return (ok, ok ? "failed at once, permanently: \(lastError ?? "")" : "\(state ?? "?") after \(attempts) attempts: \(lastError ?? "")")
        }
    }

    /// Polls until every job is succeeded, failed or cancelled; false on timeout.
    /// Waits (LISTEN, no polling) until every job in `ids` is finished.
    static func waitForFinish(conninfo: String, ids: [Int64], timeout: Double, logger: Logger) async -> Bool {
        let outcome = try? await JobWaiter(conninfo: conninfo, logger: logger).wait(for: ids, timeout: .seconds(max(0, timeout)))
        return outcome.map { !$0.timedOut } ?? false
    }
}

/// The demo's local origin: serves the sample images, answers 503 (with Retry-After) to the
/// first request of each `/flaky/…` path, and 404 to `/missing/…`. A Hummingbird server in a
/// service group of its own, for as long as the demo runs.
final class DemoOrigin: Sendable {
    private let services: BackgroundServices
    let base: String

    /// Starts serving `directory` on a free loopback port.
    init(directory: URL, logger: Logger) async throws {
        let server = try HTTPServerService(responder: Files(directory: directory), settings: HTTPServerSettings(), logger: logger)
        services = BackgroundServices([server], logger: logger)
        do {
            base = "http://127.0.0.1:\(try await server.listening.wait())"
        } catch {
            services.stop()
            throw error
        }
    }

    func stop() { services.stop() }

    /// The origin's answers.
    private struct Files: HTTPResponder {
        let directory: URL
        /// The `/flaky/…` paths answered once.
        let seen = Seen()

        final class Seen: Sendable {
            let paths = Mutex<Set<String>>([])
        }

        func respond(to request: Request, context: BasicRequestContext) async throws -> Response {
            let path = request.uri.path
            let parts = path.split(separator: "/").map(String.init)
            guard request.method == .get, let name = parts.last, !name.hasPrefix("."), !parts.contains("..") else {
                return .text(.notFound, "not found\n")
            }
            switch parts.first {
            case "images":
                return try await file(directory.appendingPathComponent(name))
            case "flaky":
                let first = seen.paths.withLock { $0.insert(path).inserted }
                return first
                    ? .text(.serviceUnavailable, "try again\n", headers: [.retryAfter: "1"]) : try await file(directory.appendingPathComponent(name))
            default:
                return .text(.notFound, "not found\n")
            }
        }

        /// A sample image, read off the event loops and the cooperative pool.
        func file(_ url: URL) async throws -> Response {
            guard let data = try await Blocking.run(.io, { FileManager.default.contents(atPath: url.path) }) else {
                return .text(.notFound, "not found\n")
            }
            let types = ["jpg": "image/jpeg", "png": "image/png", "gif": "image/gif"]
            return .body(.ok, contentType: types[url.pathExtension] ?? "application/octet-stream", data)
        }
    }
}
