import Foundation

/// A trace's id: 16 bytes, never all zero (W3C Trace Context), written as 32 lowercase hex digits.
public struct TraceID: Hashable, Sendable, CustomStringConvertible {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The id of 32 hex digits (either case), or nil: another length, a non-hex digit, all zero.
    public init?(hex: some StringProtocol) {
        guard hex.utf8.count == 32, let high = UInt64(hex.prefix(16), radix: 16), let low = UInt64(hex.dropFirst(16), radix: 16),
            high | low != 0, hex.utf8.allSatisfy(Hex.isDigit)
        else { return nil }
        self.init(high: high, low: low)
    }

    /// A random id (never all zero).
    public static func random() -> TraceID {
        var generator = SystemRandomNumberGenerator()
        while true {
            let id = TraceID(high: generator.next(), low: generator.next())
            if id.high | id.low != 0 { return id }
        }
    }

    public var description: String { Hex.digits(high) + Hex.digits(low) }
    /// Big-endian, as OTLP carries it.
    var bytes: [UInt8] { Hex.bytes(high) + Hex.bytes(low) }
}

/// A span's id: 8 bytes, never all zero, written as 16 lowercase hex digits.
public struct SpanID: Hashable, Sendable, CustomStringConvertible {
    public var value: UInt64

    public init(_ value: UInt64) { self.value = value }

    public init?(hex: some StringProtocol) {
        guard hex.utf8.count == 16, hex.utf8.allSatisfy(Hex.isDigit), let value = UInt64(hex, radix: 16), value != 0 else { return nil }
        self.value = value
    }

    public static func random() -> SpanID {
        var generator = SystemRandomNumberGenerator()
        while true {
            let value: UInt64 = generator.next()
            if value != 0 { return SpanID(value) }
        }
    }

    public var description: String { Hex.digits(value) }
    var bytes: [UInt8] { Hex.bytes(value) }
}

/// Another span a span refers to: its parent, or a span it links to.
public struct SpanContext: Hashable, Sendable {
    public var traceID: TraceID
    public var spanID: SpanID
    /// The W3C trace flags (bit 0: sampled).
    public var flags: UInt8
    /// The vendors' `tracestate` that travels with it, as the header carries it.
    public var traceState: String?
    /// Made by another process (the enqueuer's span, from a traceparent).
    public var isRemote: Bool

    public init(traceID: TraceID, spanID: SpanID, flags: UInt8 = 1, traceState: String? = nil, isRemote: Bool = false) {
        self.traceID = traceID
        self.spanID = spanID
        self.flags = flags
        self.traceState = traceState
        self.isRemote = isRemote
    }

    /// The context a W3C `traceparent` header names (`00-<trace id>-<parent id>-<flags>`, a later
    /// version's extra fields ignored), or nil for one the specification does not accept.
    public init?(traceparent: String, tracestate: String? = nil) {
        let fields = traceparent.split(separator: "-", omittingEmptySubsequences: false)
        guard fields.count >= 4, fields[0].utf8.count == 2, fields[0] != "ff", fields[0].utf8.allSatisfy(Hex.isLowerDigit),
            fields[0] != "00" || fields.count == 4,
            fields[1].utf8.allSatisfy(Hex.isLowerDigit), fields[2].utf8.allSatisfy(Hex.isLowerDigit),
            fields[3].utf8.count == 2, fields[3].utf8.allSatisfy(Hex.isLowerDigit),
            let traceID = TraceID(hex: fields[1]), let spanID = SpanID(hex: fields[2]), let flags = UInt8(fields[3], radix: 16)
        else { return nil }
        self.init(traceID: traceID, spanID: spanID, flags: flags, traceState: tracestate, isRemote: true)
    }

    public var sampled: Bool { flags & 1 == 1 }

    /// As a `traceparent` header: version 00.
    public var traceparent: String { "00-\(traceID)-\(spanID)-\(Hex.digits(flags))" }
}

/// An attribute's value: OpenTelemetry's string, integer, float, boolean and string array.
public enum AttributeValue: Sendable, Equatable {
    case string(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case strings([String])
}

/// A span's attributes, in the order they were set (a key set twice keeps its last value).
public typealias Attributes = [(key: String, value: AttributeValue)]

/// What a span's status says: unset (the default), ok, or an error with a message.
public enum SpanStatus: Sendable, Equatable {
    case unset
    case ok
    case error(String)
}

/// OpenTelemetry's span kinds (`SpanKind` in trace.proto).
public enum SpanKind: Int, Sendable {
    case `internal` = 1
    case server = 2
    case client = 3
    case producer = 4
    case consumer = 5
}

/// A moment in a span's life.
public struct SpanEvent: Sendable {
    public var name: String
    public var time: WallTime
    public var attributes: Attributes

    public init(name: String, time: WallTime, attributes: Attributes = []) {
        self.name = name
        self.time = time
        self.attributes = attributes
    }
}

/// Nanoseconds since the Unix epoch, as OTLP counts time.
public struct WallTime: Hashable, Comparable, Sendable {
    public var nanoseconds: UInt64

    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    /// The system clock now.
    public static func now() -> WallTime {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return WallTime(nanoseconds: UInt64(max(0, spec.tv_sec)) * 1_000_000_000 + UInt64(max(0, spec.tv_nsec)))
    }

    /// `seconds` later (earlier when negative; never before the epoch).
    public func adding(seconds: Double) -> WallTime {
        guard seconds.isFinite else { return self }
        let delta = (seconds * 1e9).rounded()
        if delta >= 0 { return WallTime(nanoseconds: nanoseconds &+ UInt64(min(delta, 1e18))) }
        let back = UInt64(min(-delta, 1e18))
        return WallTime(nanoseconds: nanoseconds > back ? nanoseconds - back : 0)
    }

    public static func < (a: WallTime, b: WallTime) -> Bool { a.nanoseconds < b.nanoseconds }
}

/// One finished span, as it is exported.
public struct SpanRecord: Sendable {
    public var traceID: TraceID
    public var spanID: SpanID
    /// Nil for a trace's root span.
    public var parentSpanID: SpanID?
    /// The parent was made by another process (the enqueuer's span).
    public var parentIsRemote = false
    /// The `tracestate` of the trace, carried on each of its spans.
    public var traceState: String?
    public var name: String
    public var kind: SpanKind
    public var start: WallTime
    public var end: WallTime
    public var attributes: Attributes
    public var events: [SpanEvent]
    public var links: [SpanContext]
    public var status: SpanStatus

    public init(
        traceID: TraceID, spanID: SpanID, parentSpanID: SpanID?, traceState: String? = nil, name: String, kind: SpanKind = .internal,
        start: WallTime, end: WallTime, attributes: Attributes = [], events: [SpanEvent] = [], links: [SpanContext] = [],
        status: SpanStatus = .unset
    ) {
        self.traceID = traceID
        self.spanID = spanID
        self.parentSpanID = parentSpanID
        self.traceState = traceState
        self.name = name
        self.kind = kind
        self.start = start
        self.end = max(start, end)
        self.attributes = attributes
        self.events = events
        self.links = links
        self.status = status
    }
}

/// Lowercase hex of ids and flags.
enum Hex {
    static func digits<T: FixedWidthInteger>(_ value: T) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, MemoryLayout<T>.size * 2 - text.utf8.count)) + text
    }

    static func bytes(_ value: UInt64) -> [UInt8] { (0..<8).reversed().map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }

    static func isDigit(_ c: UInt8) -> Bool { (48...57).contains(c) || (97...102).contains(c) || (65...70).contains(c) }
    static func isLowerDigit(_ c: UInt8) -> Bool { (48...57).contains(c) || (97...102).contains(c) }
}
