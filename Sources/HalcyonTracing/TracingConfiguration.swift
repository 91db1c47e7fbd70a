import Foundation
import HalcyonDomain

/// Whose child a job's `process` span is when the job was enqueued with a traceparent.
public enum TraceParentMode: String, Sendable, CaseIterable {
    /// A child of the enqueuer's span, in the enqueuer's trace (the default).
    case child
    /// A trace of its own, linked to the enqueuer's span: request traces do not stretch over the
    /// time the job waited.
    case link
    /// A trace of its own, the enqueuer's context ignored.
    case none
}

/// Which traces are recorded (`OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`, as
/// OpenTelemetry's SDKs read them).
public enum TraceSampler: Sendable, Equatable {
    case alwaysOn
    case alwaysOff
    /// A trace whose id falls in this fraction (0…1) of the id space: the same jobs on every worker.
    case ratio(Double)
    /// A job with a parent follows the parent's sampled flag; one without, `root`.
    indirect case parentBased(root: TraceSampler)

    /// Whether a trace with this id (and this parent, in child mode) is recorded.
    public func samples(_ traceID: TraceID, parent: SpanContext?) -> Bool {
        switch self {
        case .alwaysOn: true
        case .alwaysOff: false
        case .ratio(let r):
            // The id's low 8 bytes as a fraction of 2^64 (random per the W3C's level 2 flag).
            r >= 1 || Double(traceID.low >> 11) < r * Double(UInt64(1) << 53)
        case .parentBased(let root): parent.map(\.sampled) ?? root.samples(traceID, parent: nil)
        }
    }

    /// The sampler `OTEL_TRACES_SAMPLER` names, with `OTEL_TRACES_SAMPLER_ARG` for the ratios.
    static func named(_ name: String, argument: String?) throws(HalcyonError) -> TraceSampler {
        func ratio() throws(HalcyonError) -> Double {
            guard let argument else { return 1 }
            guard let r = Double(argument.trimmingCharacters(in: .whitespaces)), r >= 0, r <= 1 else {
                throw HalcyonError(.invalidOptions, "OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, not '\(argument.prefix(40))'")
            }
            return r
        }
        switch name.trimmingCharacters(in: .whitespaces).lowercased() {
        case "always_on": return .alwaysOn
        case "always_off": return .alwaysOff
        case "traceidratio": return .ratio(try ratio())
        case "parentbased_always_on": return .parentBased(root: .alwaysOn)
        case "parentbased_always_off": return .parentBased(root: .alwaysOff)
        case "parentbased_traceidratio": return .parentBased(root: .ratio(try ratio()))
        default:
            throw HalcyonError(
                .invalidOptions,
                "OTEL_TRACES_SAMPLER '\(name.prefix(40))' is not one Halcyon knows (always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio)"
            )
        }
    }
}

/// Where and how a worker exports its spans: OTLP over HTTP/protobuf, configured by the
/// standard OpenTelemetry environment variables (`init(environment:)`). Off unless an endpoint
/// is set; off, it costs nothing.
public struct TracingConfiguration: Sendable {
    /// The traces endpoint the spans are POSTed to (`…/v1/traces`); nil: tracing off.
    public var endpoint: URL?
    /// Headers sent with every export (`OTEL_EXPORTER_OTLP_HEADERS`): an API key, a tenant.
    public var headers: [(name: String, value: String)] = []
    /// `service.name` (`OTEL_SERVICE_NAME`). Default: `halcyon`.
    public var serviceName = "halcyon"
    /// More resource attributes (`OTEL_RESOURCE_ATTRIBUTES`).
    public var resourceAttributes: [(key: String, value: String)] = []
    /// Which traces are recorded. Default: parent-based, always on.
    public var sampler = TraceSampler.parentBased(root: .alwaysOn)
    /// Whose child a job's span is. Default: `.child`.
    public var parentMode = TraceParentMode.child
    /// Longest one export may take, connecting included (`OTEL_EXPORTER_OTLP_TIMEOUT`). Default 10 s.
    public var timeout: Duration = .seconds(10)
    /// Spans held for export at most; more are dropped and counted (`OTEL_BSP_MAX_QUEUE_SIZE`).
    /// Default 2048.
    public var maxQueueSize = 2048
    /// Spans per export at most (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`). Default 512.
    public var maxBatchSize = 512
    /// Longest a span waits before it is exported (`OTEL_BSP_SCHEDULE_DELAY`). Default 5 s.
    public var scheduleDelay: Duration = .seconds(5)

    public init() {}

    /// Tracing is on: an endpoint is set and the SDK not disabled.
    public var isEnabled: Bool { endpoint != nil }

    /// From OpenTelemetry's environment variables: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as
    /// it is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` appended), `…_HEADERS`,
    /// `…_TIMEOUT` (the `_TRACES_` variant first), `OTEL_EXPORTER_OTLP_PROTOCOL` (only
    /// `http/protobuf`), `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`
    /// and `_ARG`, `OTEL_BSP_*`, and `OTEL_SDK_DISABLED=true`, which turns it off. A value it
    /// cannot use is an error naming the variable.
    public init(environment: [String: String]) throws(HalcyonError) {
        func value(_ names: String...) -> String? {
            for name in names { if let v = environment[name]?.trimmingCharacters(in: .whitespaces), !v.isEmpty { return v } }
            return nil
        }
        func milliseconds(_ name: String) throws(HalcyonError) -> Duration? {
            guard let text = value(name) else { return nil }
            guard let ms = Int(text), ms > 0, ms <= 3_600_000 else {
                throw HalcyonError(.invalidOptions, "\(name) must be milliseconds from 1 to 3600000, not '\(text.prefix(40))'")
            }
            return .milliseconds(ms)
        }
        func count(_ name: String, max: Int) throws(HalcyonError) -> Int? {
            guard let text = value(name) else { return nil }
            guard let n = Int(text), n >= 1, n <= max else {
                throw HalcyonError(.invalidOptions, "\(name) must be a whole number from 1 to \(max), not '\(text.prefix(40))'")
            }
            return n
        }
        self.init()
        if let disabled = value("OTEL_SDK_DISABLED"), disabled.lowercased() == "true" { return }
        if let protocolName = value("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"), protocolName != "http/protobuf" {
            throw HalcyonError(
                .invalidOptions,
                "OTEL_EXPORTER_OTLP_PROTOCOL '\(protocolName.prefix(40))' is not supported: Halcyon exports OTLP over http/protobuf only")
        }
        if let traces = value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            endpoint = try Self.endpoint(traces, variable: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        } else if let base = value("OTEL_EXPORTER_OTLP_ENDPOINT") {
            let trimmed = base.hasSuffix("/") ? String(base.dropLast()) : base
            endpoint = try Self.endpoint(trimmed + "/v1/traces", variable: "OTEL_EXPORTER_OTLP_ENDPOINT")
        }
        if let text = value("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS") {
            headers = try Self.pairs(text, variable: "OTEL_EXPORTER_OTLP_HEADERS").map { ($0.key, $0.value) }
            for (name, value) in headers
            where !name.utf8.allSatisfy({ (33...126).contains($0) && $0 != 58 }) || value.utf8.contains(where: { $0 < 32 || $0 == 127 }) {
                throw HalcyonError(.invalidOptions, "OTEL_EXPORTER_OTLP_HEADERS: '\(name.prefix(40))' is not a header name and value HTTP allows")
            }
        }
        if let name = value("OTEL_SERVICE_NAME") { serviceName = name }
        if let text = value("OTEL_RESOURCE_ATTRIBUTES") {
            resourceAttributes = try Self.pairs(text, variable: "OTEL_RESOURCE_ATTRIBUTES")
            if value("OTEL_SERVICE_NAME") == nil, let name = resourceAttributes.last(where: { $0.key == "service.name" })?.value {
                serviceName = name
            }
            resourceAttributes.removeAll { $0.key == "service.name" }
        }
        if let name = value("OTEL_TRACES_SAMPLER") { sampler = try TraceSampler.named(name, argument: value("OTEL_TRACES_SAMPLER_ARG")) }
        if let t = try milliseconds("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") {
            timeout = t
        } else if let t = try milliseconds("OTEL_EXPORTER_OTLP_TIMEOUT") {
            timeout = t
        }
        if let n = try count("OTEL_BSP_MAX_QUEUE_SIZE", max: 1 << 20) { maxQueueSize = n }
        if let n = try count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", max: 1 << 16) { maxBatchSize = n }
        if let d = try milliseconds("OTEL_BSP_SCHEDULE_DELAY") { scheduleDelay = d }
    }

    /// Checks what the environment or a caller set.
    public func validate() throws(HalcyonError) {
        if let endpoint { _ = try Self.endpoint(endpoint.absoluteString, variable: "the traces endpoint") }
        guard timeout > .zero, timeout <= .seconds(3600) else { throw HalcyonError(.invalidOptions, "the trace export timeout must be 1 ms to 1 h") }
        guard scheduleDelay > .zero, scheduleDelay <= .seconds(3600) else {
            throw HalcyonError(.invalidOptions, "the span schedule delay must be 1 ms to 1 h")
        }
        guard maxQueueSize >= 1, maxQueueSize <= 1 << 20 else { throw HalcyonError(.invalidOptions, "the span queue must hold 1 to 1048576 spans") }
        guard maxBatchSize >= 1 else { throw HalcyonError(.invalidOptions, "a span batch must hold at least one span") }
    }

    /// An http(s) URL with a host, or an error naming `variable`.
    private static func endpoint(_ text: String, variable: String) throws(HalcyonError) -> URL {
        guard text.utf8.count <= 2048, let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty
        else {
            throw HalcyonError(.invalidOptions, "\(variable) must be an http:// or https:// URL, not '\(text.prefix(100))'")
        }
        return url
    }

    /// `key1=value1,key2=value2` with percent-encoded values (W3C Baggage's form, which both
    /// `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_RESOURCE_ATTRIBUTES` use).
    static func pairs(_ text: String, variable: String) throws(HalcyonError) -> [(key: String, value: String)] {
        guard text.utf8.count <= 8192 else { throw HalcyonError(.invalidOptions, "\(variable) is longer than 8192 bytes") }
        var out: [(key: String, value: String)] = []
        for member in text.split(separator: ",") {
            let trimmed = member.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { continue }
            guard let eq = trimmed.firstIndex(of: "=") else {
                throw HalcyonError(.invalidOptions, "\(variable): '\(trimmed.prefix(40))' is not key=value")
            }
            let key = trimmed[..<eq].trimmingCharacters(in: .whitespaces)
            let raw = trimmed[trimmed.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            guard !key.isEmpty, let value = raw.removingPercentEncoding else {
                throw HalcyonError(.invalidOptions, "\(variable): '\(trimmed.prefix(40))' is not key=value with a percent-encoded value")
            }
            out.append((key, value))
        }
        return out
    }
}
