import Foundation
import HalcyonBacklog
import HalcyonCLI
import HalcyonQueue
import HalcyonRuntime

/// S's burst shape: what a migration or a re-render does — a backlog inserted in one statement
/// into a quiet table, and workers started at once, before autovacuum has analyzed it.
extension Bench {
    /// Queued jobs a burst inserts (each × --scale, at least 2,000).
    static let burstSizes = [100_000, 1_000_000]
    /// The windows a burst's throughput is read over, from the workers' start (× --scale below 1).
    static let burstWindows: [Duration] = [.seconds(10), .seconds(30), .seconds(60)]

    /// For each size, --repeat rounds of: the table emptied, vacuumed and analyzed (the statistics
    /// of a quiet table); the burst inserted in one statement; two workers started at once, the
    /// jobs finished read at 10, 30 and 60 s — first without, then (the same again) with an
    /// `ANALYZE` between the insert and the start.
    func runBurst(conninfo: String, scratch: URL) async throws -> [BurstRun] {
        let c = try await PGConnection.connect(conninfo, label: "bench-burst")
        defer { Task { await c.close() } }
        try await Self.ensureOnlyBenchJobs(c)
        let sources = try Self.backlogSources(in: scratch)
        let sizes = Set(Self.burstSizes.map({ max(2000, Int(Double($0) * scale)) })).sorted()
        let windows = Self.burstWindows.map { $0 * max(0.1, min(1, scale)) }
        var out: [BurstRun] = []
        for size in sizes {
            var backlog = Backlog(queued: size, history: 0, sources: sources.urls)
            backlog.delayedEvery = nil
            backlog.keyPrefix = "halcyon-bench:burst-"
            for round in 1...repeats {
                var run = BurstRun(queued: size, windows: windows.map(\.seconds))
                for analyzed in [false, true] {
                    try await backlog.remove(c)
                    try await Backlog.analyzeJobs(c)
                    let inserting = ContinuousClock.now
                    try await backlog.enqueue(c, jobs: 0..<size)
                    let insert = (ContinuousClock.now - inserting).seconds
                    if analyzed { try await Backlog.analyzeJobs(c) }
                    let store = scratch.appendingPathComponent("store-burst-\(getpid())")
                    try? FileManager.default.removeItem(at: store)
                    defer { try? FileManager.default.removeItem(at: store) }
                    let started = Date(), clock = ContinuousClock.now
                    let workers = try WorkerPair.start(
                        self, conninfo: conninfo, store: store, fileRoot: sources.directory, scratch: scratch, drain: false)
                    var finished: [Int] = []
                    do {
                        for window in windows {
                            try await Task.sleep(until: clock + window)
                            if workers.allExited {
                                try workers.checkExits()
                                throw CommandFailure("the workers stopped; see \(workers.logs.joined(separator: ", "))")
                            }
                            finished.append(try await Self.finished(since: started, on: c))
                        }
                    } catch {
                        await workers.stop()
                        throw error
                    }
                    await workers.stop()
                    let rates = zip(windows, finished).map { Double($1) / $0.seconds }
                    if analyzed { run.analyzed = rates } else { run.fresh = rates }
                    print(
                        "S burst: \(size) jobs inserted in " + String(format: "%.1f s", insert) + ", round \(round), "
                            + (analyzed ? "analyzed first" : "not analyzed") + ": "
                            + zip(windows, rates).map { String(format: "%.0f jobs/s over %.0f s", $1, $0.seconds) }.joined(separator: ", "))
                }
                out.append(run)
            }
            try await backlog.remove(c)
            try await Backlog.analyzeJobs(c)
        }
        return out
    }
}

/// One round of a burst: two workers' jobs/s from their start over each window, on the table as
/// inserted and on the same analyzed first.
struct BurstRun {
    var queued: Int
    /// The windows' lengths, seconds.
    var windows: [Double]
    var fresh: [Double] = []
    var analyzed: [Double] = []

    /// Each window's fresh rate over its analyzed one.
    var ratios: [Double] { zip(fresh, analyzed).map { $1 > 0 ? $0 / $1 : 0 } }

    static func summary(_ runs: [BurstRun]) -> String {
        guard let first = runs.first else { return "" }
        func cell(_ text: String) -> String { text.padding(toLength: 34, withPad: " ", startingAt: 0) }
        var lines = ["S burst — a backlog inserted in one statement, two workers started at once (jobs/s from their start):"]
        lines.append("  queued     round  " + first.windows.map { cell("first \(Int($0.rounded())) s: fresh / analyzed") }.joined())
        for (i, r) in runs.enumerated() {
            let round = runs[..<i].filter { $0.queued == r.queued }.count + 1
            let cells = zip(zip(r.fresh, r.analyzed), r.ratios).map { pair, ratio in
                cell(String(format: "%6.0f / %6.0f (%.2f×)", pair.0, pair.1, ratio))
            }
            lines.append("  " + String(r.queued).padding(toLength: 9, withPad: " ", startingAt: 0) + "  \(round)      " + cells.joined())
        }
        return lines.map { String($0.reversed().drop { $0 == " " }.reversed()) }.joined(separator: "\n") + "\n"
    }

    static func json(_ runs: [BurstRun]) -> JSONValue {
        .array(
            runs.map { r in
                let o: [String: JSONValue] = [
                    "queued": .number(Double(r.queued)),
                    "windows_s": .array(r.windows.map { .number($0) }),
                    "fresh_jobs_per_second": .array(r.fresh.map { .number($0.rounded()) }),
                    "analyzed_jobs_per_second": .array(r.analyzed.map { .number($0.rounded()) }),
                    "ratios": .array(r.ratios.map { .number(($0 * 100).rounded() / 100) }),
                ]
                return .object(o)
            })
    }
}
