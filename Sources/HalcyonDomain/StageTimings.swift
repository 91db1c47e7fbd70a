import HalcyonRuntime

/// Seconds one job's attempt spent in each stage (nil: the stage did not run). Recorded on the
/// row (`timings`, in milliseconds) and observed by the stage-duration histograms.
public struct StageTimings: Sendable, Equatable {
    public var queueWait: Double?
    public var fetch: Double?
    public var decode: Double?
    public var process: Double?
    public var encode: Double?
    public var store: Double?
    /// From the claim to the outcome.
    public var total: Double?
    /// CPU seconds of the stages that run on one thread (`StageClock`): decode, process,
    /// encode and store — this job's own, whatever the outcome: a decode shared by the jobs of
    /// one source is split evenly among them (`decodeCPU` is this job's share), and a failed
    /// attempt counts what it spent up to the failure. In `timings` as `decode_cpu_ms` …; not
    /// in the metrics.
    public var decodeCPU: Double?
    public var processCPU: Double?
    public var encodeCPU: Double?
    public var storeCPU: Double?
    /// This job's share of the bytes downloaded for it: a download shared by the jobs of one
    /// source is split evenly among them (the remainder to the first). In `timings` as
    /// `fetched_bytes`; nil when nothing was downloaded (a store hit, a failed download).
    public var fetchedBytes: Int?

    public init() {}

    /// The stages by their names in `timings` and in the metrics.
    public var stages: [(name: String, seconds: Double)] {
        [
            ("queue_wait", queueWait), ("fetch", fetch), ("decode", decode), ("process", process),
            ("encode", encode), ("store", store), ("total", total),
        ].compactMap { n, v in v.map { (n, $0) } }
    }

    /// `{"fetch_ms": 12.3, …, "decode_cpu_ms": 9.8, …, "fetched_bytes": 4005844}`, as the
    /// `timings` column holds it.
    public var json: JSONValue {
        let cpu = [("decode_cpu", decodeCPU), ("process_cpu", processCPU), ("encode_cpu", encodeCPU), ("store_cpu", storeCPU)]
            .compactMap { n, v in v.map { (n, $0) } }
        var fields = Dictionary(
            uniqueKeysWithValues: (stages + cpu).map { ("\($0.name)_ms", JSONValue.number(($0.seconds * 10_000).rounded() / 10)) })
        if let fetchedBytes { fields["fetched_bytes"] = .number(Double(fetchedBytes)) }
        return .object(fields)
    }
}
