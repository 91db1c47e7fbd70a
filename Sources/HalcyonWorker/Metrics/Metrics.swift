import CoreMetrics
import Foundation
import HalcyonDomain
import HalcyonQueue
import HalcyonStore
import Prometheus
import Synchronization

/// How a job's attempt ended, as the `outcome` label of `halcyon_jobs_total`.
public enum JobOutcome: String, Sendable, CaseIterable {
    /// Recorded as succeeded.
    case succeeded
    /// Failed permanently or out of attempts.
    case failed
    /// Failed transiently; scheduled again.
    case retried
    /// Released unfinished at shutdown, without spending the attempt.
    case released
    /// Cancelled or lost while running: not recorded by this worker.
    case abandoned
    /// The database refused the outcome (`worker.outcome_rejected`).
    case rejected
}

/// A worker's metrics, reported through swift-metrics: whatever backend the process bootstraps
/// (`MetricsSystem.bootstrap`) receives them — Prometheus, StatsD, OpenTelemetry. `halcyon work`
/// bootstraps a Prometheus registry (`prometheusFactory(registry:)`) and publishes it with
/// `MetricsExporter`.
///
/// Counters: `halcyon_jobs_total{outcome,code}`, `halcyon_cache_hits_total`,
/// `halcyon_fetch_bytes_total`, `halcyon_store_bytes_written_total`, `halcyon_decodes_total`,
/// `halcyon_rescued_jobs_total`, `halcyon_store_sweeps_total`, `halcyon_store_swept_bytes_total`.
/// Timer (a histogram in Prometheus): `halcyon_stage_duration_seconds{stage}`. Gauges:
/// `halcyon_jobs_in_flight`, `halcyon_processing_slots`, `halcyon_fetch_slots`,
/// `halcyon_store_bytes` (after the last sweep this worker ran), `halcyon_store_available` (0 while
/// claiming is paused because the store cannot take results), `halcyon_store_free_bytes` and
/// `halcyon_store_filesystem_bytes` (a disk store's filesystem), `halcyon_worker_start_time_seconds`,
/// `halcyon_worker_restarts` (how often the supervisor restarted the image process before this one);
/// per queue with a fleet-wide limit (`queues(_:)`, the same fleet-wide values from every
/// worker): `halcyon_queue_max_running{queue}`, `halcyon_queue_max_per_second{queue}`,
/// `halcyon_queue_max_running_per_key{queue}` (each only while set) and
/// `halcyon_queue_running{queue}` (its jobs running across every worker).
public final class Metrics: Sendable {
    /// Histogram buckets (seconds) for stage durations: 1 ms to 1 min.
    public static let stageBuckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]
    /// The stage timer's label.
    public static let stageDuration = "halcyon_stage_duration_seconds"

    private let factory: any MetricsFactory
    private let jobCounters = Mutex<[String: CoreMetrics.Counter]>([:])
    private let stageTimers = Mutex<[String: CoreMetrics.Timer]>([:])
    private let cacheHits: CoreMetrics.Counter
    private let fetchedBytes: CoreMetrics.Counter
    private let storedBytes: CoreMetrics.Counter
    private let decodes: CoreMetrics.Counter
    private let rescuedJobs: CoreMetrics.Counter
    private let sweeps: CoreMetrics.Counter
    private let sweptBytes: CoreMetrics.Counter
    private let droppedSpans: CoreMetrics.Counter
    private let inFlight: CoreMetrics.Gauge
    private let storeBytes: CoreMetrics.Gauge
    private let storeAvailable: CoreMetrics.Gauge
    private let storeFreeBytes: CoreMetrics.Gauge
    private let storeFilesystemBytes: CoreMetrics.Gauge
    /// The queue gauges now exported, by label and queue.
    private let queueGauges = Mutex<[QueueGauge: CoreMetrics.Gauge]>([:])

    private struct QueueGauge: Hashable {
        var label: String
        var queue: String
    }

    /// `factory`: where the metrics go; default the process's bootstrapped one.
    public init(processingSlots: Int, fetchSlots: Int, restarts: Int = 0, factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
        func counter(_ label: String) -> CoreMetrics.Counter { CoreMetrics.Counter(label: label, dimensions: [], factory: factory) }
        func gauge(_ label: String) -> CoreMetrics.Gauge { CoreMetrics.Gauge(label: label, dimensions: [], factory: factory) }
        cacheHits = counter("halcyon_cache_hits_total")
        fetchedBytes = counter("halcyon_fetch_bytes_total")
        storedBytes = counter("halcyon_store_bytes_written_total")
        decodes = counter("halcyon_decodes_total")
        rescuedJobs = counter("halcyon_rescued_jobs_total")
        sweeps = counter("halcyon_store_sweeps_total")
        sweptBytes = counter("halcyon_store_swept_bytes_total")
        droppedSpans = counter("halcyon_trace_spans_dropped_total")
        inFlight = gauge("halcyon_jobs_in_flight")
        storeBytes = gauge("halcyon_store_bytes")
        storeAvailable = gauge("halcyon_store_available")
        storeFreeBytes = gauge("halcyon_store_free_bytes")
        storeFilesystemBytes = gauge("halcyon_store_filesystem_bytes")
        inFlight.record(0)
        storeAvailable.record(1)
        gauge("halcyon_processing_slots").record(processingSlots)
        gauge("halcyon_fetch_slots").record(fetchSlots)
        gauge("halcyon_worker_start_time_seconds").record(Date().timeIntervalSince1970.rounded())
        gauge("halcyon_worker_restarts").record(restarts)
    }

    /// A Prometheus factory writing into `registry`, with the stage histogram's buckets.
    public static func prometheusFactory(registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets[stageDuration] = stageBuckets.map { Duration.nanoseconds(Int64(($0 * 1e9).rounded())) }
        return factory
    }

    /// Counts `jobs` attempts that ended with `outcome` (and `code`, for failures).
    public func count(_ outcome: JobOutcome, code: ErrorCode? = nil, jobs: Int = 1) {
        let codeLabel = code?.description ?? ""
        let key = outcome.rawValue + "\u{0}" + codeLabel
        let counter = jobCounters.withLock { counters in
            if let existing = counters[key] { return existing }
            let made = CoreMetrics.Counter(
                label: "halcyon_jobs_total", dimensions: [("outcome", outcome.rawValue), ("code", codeLabel)], factory: factory)
            counters[key] = made
            return made
        }
        counter.increment(by: jobs)
    }

    public func cacheHit() { cacheHits.increment() }
    public func fetched(bytes: Int) { fetchedBytes.increment(by: bytes) }
    public func stored(bytes: Int) { storedBytes.increment(by: bytes) }
    public func decoded() { decodes.increment() }
    public func rescued(_ count: Int) { rescuedJobs.increment(by: count) }
    /// Spans not exported: the span queue was full, the collector failed or a stop's deadline came.
    public func spansDropped(_ count: Int) { droppedSpans.increment(by: count) }
    /// The jobs the worker holds now (fetching, waiting for a slot, processing, storing).
    public func jobsInFlight(_ count: Int) { inFlight.record(count) }

    /// Whether the store takes this worker's results (0: claiming is paused for it).
    public func storeAvailable(_ available: Bool) { storeAvailable.record(available ? 1 : 0) }

    /// A disk store's filesystem as last read.
    public func storeSpace(_ space: StoreSpace) {
        storeFreeBytes.record(space.freeBytes)
        storeFilesystemBytes.record(space.totalBytes)
    }

    public func swept(_ report: SweepReport) {
        sweeps.increment()
        sweptBytes.increment(by: Int(report.freedBytes))
        storeBytes.record(Int(report.keptBytes))
    }

    /// The queues with fleet-wide limits, as read now: a gauge per limit set and one of running
    /// jobs per queue; the gauges of a limit or queue no longer there are removed.
    public func queues(_ readings: [LimitedQueue]) {
        var wanted: [QueueGauge: Double] = [:]
        for r in readings {
            wanted[QueueGauge(label: "halcyon_queue_running", queue: r.queue)] = Double(r.running)
            if let n = r.limits.maxRunning { wanted[QueueGauge(label: "halcyon_queue_max_running", queue: r.queue)] = Double(n) }
            if let n = r.limits.maxPerSecond { wanted[QueueGauge(label: "halcyon_queue_max_per_second", queue: r.queue)] = n }
            if let n = r.limits.maxRunningPerKey { wanted[QueueGauge(label: "halcyon_queue_max_running_per_key", queue: r.queue)] = Double(n) }
        }
        queueGauges.withLock { gauges in
            for (key, gauge) in gauges where wanted[key] == nil {
                gauge.destroy()
                gauges[key] = nil
            }
            for (key, value) in wanted {
                let gauge = gauges[key] ?? CoreMetrics.Gauge(label: key.label, dimensions: [("queue", key.queue)], factory: factory)
                gauges[key] = gauge
                gauge.record(value)
            }
        }
    }

    /// Records each stage that ran.
    public func observe(_ timings: StageTimings) {
        for (stage, seconds) in timings.stages {
            let timer = stageTimers.withLock { timers in
                if let existing = timers[stage] { return existing }
                let made = CoreMetrics.Timer(label: Self.stageDuration, dimensions: [("stage", stage)], factory: factory)
                timers[stage] = made
                return made
            }
            timer.recordNanoseconds(Int64((seconds * 1e9).rounded()))
        }
    }
}
