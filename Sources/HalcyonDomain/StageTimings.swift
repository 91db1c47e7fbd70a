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
    /// encode and store. In `timings` as `decode_cpu_ms` …; not in the metrics.
    public var decodeCPU: Double?
    public var processCPU: Double?
    public var encodeCPU: Double?
    public var storeCPU: Double?

    public init() {}

    /// The stages by their names in `timings` and in the metrics.
    public var stages: [(name: String, seconds: Double)] {
        [
            ("queue_wait", queueWait), ("fetch", fetch), ("decode", decode), ("process", process),
            ("encode", encode), ("store", store), ("total", total),
        ].compactMap { n, v in v.map { (n, $0) } }
    }

    /// `{"fetch_ms": 12.3, …, "decode_cpu_ms": 9.8, …}`, as the `timings` column holds it.
    public var json: JSONValue {
        let cpu = [("decode_cpu", decodeCPU), ("process_cpu", processCPU), ("encode_cpu", encodeCPU), ("store_cpu", storeCPU)]
            .compactMap { n, v in v.map { (n, $0) } }
        return .object(
            Dictionary(uniqueKeysWithValues: (stages + cpu).map { ("\($0.name)_ms", .number(($0.seconds * 10_000).rounded() / 10)) }))
    }
}
