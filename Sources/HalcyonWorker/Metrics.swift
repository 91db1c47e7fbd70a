import Foundation
import HalcyonCore
import HalcyonStore
import Synchronization

/// One worker process's metrics, rendered in Prometheus' text exposition format (0.0.4) on
/// `--metrics-port` or into `--metrics-file` (node_exporter's textfile collector).
///
/// Counters: `halcyon_jobs_total{outcome,code}`, `halcyon_cache_hits_total`,
/// `halcyon_fetch_bytes_total`, `halcyon_store_bytes_written_total`, `halcyon_decodes_total`,
/// `halcyon_rescued_jobs_total`, `halcyon_store_sweeps_total`, `halcyon_store_swept_bytes_total`.
/// Histogram: `halcyon_stage_duration_seconds{stage}`. Gauges: `halcyon_jobs_in_flight`,
/// `halcyon_processing_slots`, `halcyon_fetch_slots`, `halcyon_store_bytes` (after the last sweep
/// this worker ran), `halcyon_worker_start_time_seconds`.
public final class Metrics: Sendable {
    /// Histogram buckets (seconds) for stage durations: 1 ms to 1 min.
    public static let buckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

    private struct Histogram {
        var counts = [Int](repeating: 0, count: Metrics.buckets.count)
        var sum = 0.0
        var count = 0
    }

    private struct State {
        var jobs: [Outcome: Int] = [:]
        var cacheHits = 0
        var fetchedBytes = 0
        var storedBytes = 0
        var decodes = 0
        var rescued = 0
        var sweeps = 0
        var sweptBytes: Int64 = 0
        var storeBytes: Int64?
        var stages: [String: Histogram] = [:]
    }

    /// How a job's attempt ended, and with which error code.
    public struct Outcome: Hashable, Sendable {
        /// `succeeded`, `failed` (permanently or out of attempts), `retried` (scheduled again),
        /// `released` (at shutdown), `abandoned` (cancelled or lost while running).
        public var outcome: String
        public var code: String
    }

    private let state = Mutex(State())
    private let started = Date()
    private let processingSlots: Int
    private let fetchSlots: Int

    public init(processingSlots: Int, fetchSlots: Int) {
        self.processingSlots = processingSlots
        self.fetchSlots = fetchSlots
    }

    public func count(_ outcome: String, code: String = "", jobs: Int = 1) {
        state.withLock { $0.jobs[Outcome(outcome: outcome, code: code), default: 0] += jobs }
    }

    public func cacheHit() { state.withLock { $0.cacheHits += 1 } }
    public func fetched(bytes: Int) { state.withLock { $0.fetchedBytes += bytes } }
    public func stored(bytes: Int) { state.withLock { $0.storedBytes += bytes } }
    public func decoded() { state.withLock { $0.decodes += 1 } }
    public func rescued(_ n: Int) { state.withLock { $0.rescued += n } }

    public func swept(_ report: SweepReport) {
        state.withLock { s in
            s.sweeps += 1
            s.sweptBytes += report.freedBytes
            s.storeBytes = report.keptBytes
        }
    }

    /// Adds each stage that ran to its histogram.
    public func observe(_ timings: StageTimings) {
        state.withLock { s in
            for (stage, seconds) in timings.stages {
                var h = s.stages[stage] ?? Histogram()
                for (i, bound) in Self.buckets.enumerated() where seconds <= bound { h.counts[i] += 1 }
                h.sum += seconds
                h.count += 1
                s.stages[stage] = h
            }
        }
    }

    /// The exposition text; `inFlight` is the jobs the worker holds now.
    public func render(inFlight: Int) -> String {
        let s = state.withLock { $0 }
        var out = ""
        func family(_ name: String, _ type: String, _ help: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        func sample(_ name: String, _ labels: [(String, String)], _ value: Double) {
            let l = labels.isEmpty ? "" : "{" + labels.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",") + "}"
            out += "\(name)\(l) \(Self.number(value))\n"
        }
        family("halcyon_jobs_total", "counter", "Job attempts this worker finished, by outcome (succeeded, failed, retried, released, abandoned) and error code.")
        for (o, n) in s.jobs.sorted(by: { ($0.key.outcome, $0.key.code) < ($1.key.outcome, $1.key.code) }) {
            sample("halcyon_jobs_total", [("outcome", o.outcome), ("code", o.code)], Double(n))
        }
        let counters: [(name: String, help: String, value: Double)] = [
            ("halcyon_cache_hits_total", "Jobs served from the store without fetching.", Double(s.cacheHits)),
            ("halcyon_fetch_bytes_total", "Bytes of source images fetched (downloads, files, data URLs).", Double(s.fetchedBytes)),
            ("halcyon_store_bytes_written_total", "Bytes of results stored (new objects only).", Double(s.storedBytes)),
            ("halcyon_decodes_total", "Source images decoded (one per source shared by a batch's jobs).", Double(s.decodes)),
            ("halcyon_rescued_jobs_total", "Jobs of dead or stalled workers this worker moved back to the queue.", Double(s.rescued)),
            ("halcyon_store_sweeps_total", "Store sweeps this worker ran.", Double(s.sweeps)),
            ("halcyon_store_swept_bytes_total", "Bytes those sweeps freed.", Double(s.sweptBytes)),
        ]
        for c in counters {
            family(c.name, "counter", c.help)
            sample(c.name, [], c.value)
        }

        family("halcyon_stage_duration_seconds", "histogram", "Seconds per job in each stage: queue_wait, fetch, decode, process, encode, store, total.")
        for (stage, h) in s.stages.sorted(by: { $0.key < $1.key }) {
            for (i, bound) in Self.buckets.enumerated() {
                sample("halcyon_stage_duration_seconds_bucket", [("stage", stage), ("le", Self.number(bound))], Double(h.counts[i]))
            }
            sample("halcyon_stage_duration_seconds_bucket", [("stage", stage), ("le", "+Inf")], Double(h.count))
            sample("halcyon_stage_duration_seconds_sum", [("stage", stage)], h.sum)
            sample("halcyon_stage_duration_seconds_count", [("stage", stage)], Double(h.count))
        }

        var gauges: [(name: String, help: String, value: Double)] = [
            ("halcyon_jobs_in_flight", "Jobs this worker holds now (fetching, waiting for a slot, processing, storing).", Double(inFlight)),
            ("halcyon_processing_slots", "Processing slots (--concurrency).", Double(processingSlots)),
            ("halcyon_fetch_slots", "Download slots (--fetch-concurrency).", Double(fetchSlots)),
            ("halcyon_worker_start_time_seconds", "When this worker started, in seconds since the epoch.", started.timeIntervalSince1970.rounded()),
        ]
        if let bytes = s.storeBytes {
            gauges.append(("halcyon_store_bytes", "Bytes in the store after the last sweep this worker ran.", Double(bytes)))
        }
        for g in gauges {
            family(g.name, "gauge", g.help)
            sample(g.name, [], g.value)
        }
        return out
    }

    static func escape(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }

    static func number(_ v: Double) -> String {
        if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
        return String(v)
    }
}
