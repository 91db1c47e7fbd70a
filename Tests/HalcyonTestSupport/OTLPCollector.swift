import Foundation
import HalcyonRuntime

/// scripts/test's OTLP/HTTP trace receiver (scripts/test-otlp-receiver.py), which decodes every
/// export with OpenTelemetry's own protobuf definitions. Each collector is a path of its own on
/// it, so that tests running side by side see only their spans.
public struct OTLPCollector: Sendable {
    public let prefix: String

    public init(_ name: String) {
        prefix = "/t/\(name)-\(UInt32.random(in: 0...UInt32.max))"
    }

    public static var available: Bool { !(ProcessInfo.processInfo.environment["HALCYON_TEST_OTLP"] ?? "").isEmpty }
    static var base: String { ProcessInfo.processInfo.environment["HALCYON_TEST_OTLP"] ?? "" }

    /// The traces endpoint (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) of a live collector.
    public var endpoint: String { "\(Self.base)\(prefix)/v1/traces" }
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` for the same: the exporter appends `/v1/traces`.
    public var baseEndpoint: String { "\(Self.base)\(prefix)" }
    /// One that reads each export and never answers.
    public var hangingEndpoint: String { "\(Self.base)/hang\(prefix)/v1/traces" }
    /// One that answers every export with 503.
    public var refusingEndpoint: String { "\(Self.base)/refuse\(prefix)/v1/traces" }

    /// The spans received so far, as the receiver decoded them: `trace_id`, `span_id`,
    /// `parent_span_id` (hex; "" for a root), `name`, `kind`, `start`, `end`, `attributes`,
    /// `events`, `links`, `status`, `resource`, `scope`, `headers`.
    public func spans() throws -> [JSONValue] {
        guard case .array(let spans)? = JSONValue.parse(try Origin.get("\(Self.base)\(prefix)/spans")) else { return [] }
        return spans
    }

    /// Requests under this prefix that did not decode.
    public func undecodable() throws -> Int { Int(try Origin.get("\(Self.base)\(prefix)/undecodable")) ?? -1 }

    /// Waits up to `timeout` seconds until `condition` holds of the spans received; returns them.
    public func waitForSpans(_ timeout: Double = 60, until condition: ([JSONValue]) -> Bool) async throws -> [JSONValue] {
        var spans: [JSONValue] = []
        _ = try await waitUntil(timeout) {
            spans = try self.spans()
            return condition(spans)
        }
        return spans
    }
}
