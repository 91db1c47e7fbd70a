/// Spans as an OTLP/HTTP request body: `ExportTraceServiceRequest` of
/// opentelemetry/proto/collector/trace/v1, in protobuf's binary wire format, written by hand —
/// the few messages a trace export needs do not earn a protobuf library and its generated code.
/// The suite decodes what this writes with the OpenTelemetry project's own definitions (PyPI
/// `opentelemetry-proto`).
public enum OTLPEncoding {
    /// One request: every span under one resource (`resource`'s attributes: `service.name` …)
    /// and one instrumentation scope.
    public static func request(
        _ spans: [SpanRecord], resource: Attributes, scope: (name: String, version: String)
    ) -> [UInt8] {
        var scopeSpans = ProtoWriter()
        scopeSpans.message(1) { w in
            w.string(1, scope.name)
            w.string(2, scope.version)
        }
        for span in spans { scopeSpans.message(2) { encode(span, into: &$0) } }
        var resourceSpans = ProtoWriter()
        resourceSpans.message(1) { w in for attribute in resource { w.message(1) { keyValue(attribute, into: &$0) } } }
        resourceSpans.bytes(2, scopeSpans.buffer)
        var request = ProtoWriter()
        request.bytes(1, resourceSpans.buffer)
        return request.buffer
    }

    /// trace.proto's `Span`.
    static func encode(_ span: SpanRecord, into w: inout ProtoWriter) {
        w.bytes(1, span.traceID.bytes)
        w.bytes(2, span.spanID.bytes)
        if let state = span.traceState, !state.isEmpty { w.string(3, state) }
        if let parent = span.parentSpanID { w.bytes(4, parent.bytes) }
        w.string(5, span.name)
        w.varint(6, UInt64(span.kind.rawValue))
        w.fixed64(7, span.start.nanoseconds)
        w.fixed64(8, span.end.nanoseconds)
        for attribute in span.attributes { w.message(9) { keyValue(attribute, into: &$0) } }
        for event in span.events {
            w.message(11) { e in
                e.fixed64(1, event.time.nanoseconds)
                e.string(2, event.name)
                for attribute in event.attributes { e.message(3) { keyValue(attribute, into: &$0) } }
            }
        }
        for link in span.links {
            w.message(13) { l in
                l.bytes(1, link.traceID.bytes)
                l.bytes(2, link.spanID.bytes)
                if let state = link.traceState, !state.isEmpty { l.string(3, state) }
                l.fixed32(6, UInt32(link.flags) | 0x100 | (link.isRemote ? 0x200 : 0))
            }
        }
        switch span.status {
        case .unset: break
        case .ok: w.message(15) { $0.varint(3, 1) }
        case .error(let message):
            w.message(15) { s in
                s.string(2, message)
                s.varint(3, 2)
            }
        }
        // Sampled, and whether the parent is remote (SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK, _IS_REMOTE_MASK).
        w.fixed32(16, 0x101 | (span.parentIsRemote ? 0x200 : 0))
    }

    /// common.proto's `KeyValue` with its `AnyValue`.
    static func keyValue(_ attribute: (key: String, value: AttributeValue), into w: inout ProtoWriter) {
        w.string(1, attribute.key)
        w.message(2) { anyValue(attribute.value, into: &$0) }
    }

    private static func anyValue(_ value: AttributeValue, into w: inout ProtoWriter) {
        switch value {
        case .string(let s): w.string(1, s, always: true)
        case .bool(let b): w.varint(2, b ? 1 : 0, always: true)
        case .int(let i): w.varint(3, UInt64(bitPattern: i), always: true)
        case .double(let d): w.fixed64(4, d.bitPattern, always: true)
        case .strings(let list):
            w.message(5) { array in for s in list { array.message(1) { $0.string(1, s, always: true) } } }
        }
    }
}

/// Protobuf's wire format, the parts OTLP's trace messages use: varints, 64- and 32-bit fixed
/// fields, and length-delimited bytes, strings and nested messages.
struct ProtoWriter {
    var buffer: [UInt8] = []

    private mutating func tag(_ field: Int, _ wireType: UInt8) { rawVarint(UInt64(field) << 3 | UInt64(wireType)) }

    private mutating func rawVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            buffer.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        buffer.append(UInt8(v))
    }

    /// proto3 leaves default values out; `always` writes them (a oneof member must be present).
    mutating func varint(_ field: Int, _ value: UInt64, always: Bool = false) {
        guard value != 0 || always else { return }
        tag(field, 0)
        rawVarint(value)
    }

    mutating func fixed64(_ field: Int, _ value: UInt64, always: Bool = false) {
        guard value != 0 || always else { return }
        tag(field, 1)
        for i in 0..<8 { buffer.append(UInt8(truncatingIfNeeded: value >> (i * 8))) }
    }

    mutating func fixed32(_ field: Int, _ value: UInt32) {
        guard value != 0 else { return }
        tag(field, 5)
        for i in 0..<4 { buffer.append(UInt8(truncatingIfNeeded: value >> (i * 8))) }
    }

    mutating func bytes(_ field: Int, _ value: [UInt8]) {
        tag(field, 2)
        rawVarint(UInt64(value.count))
        buffer.append(contentsOf: value)
    }

    mutating func string(_ field: Int, _ value: String, always: Bool = false) {
        guard !value.isEmpty || always else { return }
        bytes(field, Array(value.utf8))
    }

    mutating func message(_ field: Int, _ body: (inout ProtoWriter) -> Void) {
        var nested = ProtoWriter()
        body(&nested)
        bytes(field, nested.buffer)
    }
}
