import Foundation

/// An enqueuer's W3C Trace Context (https://www.w3.org/TR/trace-context/), as a job's row
/// carries it (`halcyon.jobs.traceparent`, `tracestate`): the request that enqueued the job.
/// The rules are the table's (`halcyon.is_valid_traceparent`, `is_valid_tracestate`, migration
/// 0022); the CLI checks them here first, for an error before the database's.
public struct TraceContext: Sendable, Equatable {
    /// `version-traceid-parentid-flags`, lowercase hex.
    public var traceparent: String
    /// The vendors' list carried beside it, if any.
    public var tracestate: String?

    /// The most bytes of either header the table takes.
    public static let maxBytes = 512
    /// The most list members of a tracestate.
    public static let maxMembers = 32

    /// The trace's id: the traceparent's 32 hex digits after the version.
    public var traceID: Substring { Self.traceID(of: traceparent) }

    /// The trace id of a traceparent the table accepted (32 hex digits after the version).
    public static func traceID(of traceparent: String) -> Substring {
        traceparent.dropFirst(3).prefix(32)
    }

    /// A trace id as the `trace_id` column holds it: 32 lowercase hex digits, not all zero.
    public static func isValid(traceID: String) -> Bool {
        traceID.utf8.count == 32 && traceID.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
            && traceID.utf8.contains { $0 != 48 }
    }

    /// The trace id of `traceparent` when it has the W3C format, else nil (a value read back
    /// from a row whose checks were bypassed).
    public static func validTraceID(of traceparent: String) -> String? {
        isValid(traceparent: traceparent) ? String(traceID(of: traceparent)) : nil
    }

    /// A context from its two headers; throws `problem`'s reason.
    public init(traceparent: String, tracestate: String? = nil) throws(TraceContextError) {
        if let problem = Self.problem(traceparent: traceparent, tracestate: tracestate) { throw TraceContextError(reason: problem) }
        self.traceparent = traceparent
        self.tracestate = tracestate
    }

    /// Why the pair cannot be a job's trace context, or nil.
    public static func problem(traceparent: String?, tracestate: String?) -> String? {
        if let traceparent, !isValid(traceparent: traceparent) {
            return
                "traceparent must be a W3C traceparent (00-<32 hex digits>-<16 hex digits>-<2 hex digits>, lowercase, ids not all zero), not \(quoted(traceparent))"
        }
        if tracestate != nil, traceparent == nil { return "tracestate needs a traceparent" }
        if let tracestate, !isValid(tracestate: tracestate) {
            return
                "tracestate must be a W3C tracestate (key=value members separated by commas, at most \(maxMembers), \(maxBytes) bytes in all), not \(quoted(tracestate))"
        }
        return nil
    }

    /// A traceparent the specification accepts: version 00 is exactly 55 characters, a later one
    /// (01–fe) may add `-…` fields; ff, an all-zero trace id or parent id are invalid.
    public static func isValid(traceparent value: String) -> Bool {
        let b = Array(value.utf8)
        guard b.count >= 55, b.count <= maxBytes else { return false }
        let hex = { (c: UInt8) in (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) }
        for (i, c) in b.prefix(55).enumerated() {
            let dash = i == 2 || i == 35 || i == 52
            guard dash ? c == 0x2D : hex(c) else { return false }
        }
        if b.count > 55 { guard b[55] == 0x2D, b[56...].allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else { return false } }
        let version = String(decoding: b[0..<2], as: UTF8.self)
        guard version != "ff", version != "00" || b.count == 55 else { return false }
        return b[3..<35].contains { $0 != 0x30 } && b[36..<52].contains { $0 != 0x30 }
    }

    /// A tracestate the specification accepts: at most 32 `key=value` members (empty ones
    /// between commas allowed, not counted), no key twice, 512 bytes in all.
    public static func isValid(tracestate value: String) -> Bool {
        guard value.utf8.count <= maxBytes else { return false }
        let members = self.members(of: value)
        guard members.count <= maxMembers, members.allSatisfy(isValid(member:)) else { return false }
        return Set(members.map { $0.prefix { $0 != "=" } }).count == members.count
    }

    /// The non-empty members of a tracestate list, without the spaces and tabs around them.
    static func members(of value: String) -> [String] {
        value.split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " \t")) }.filter { !$0.isEmpty }
    }

    /// `key=value` (Trace Context Level 1's grammar): a simple key — a lowercase letter, then
    /// up to 255 lowercase letters, digits and `_-*/` — or a multi-tenant key — a lowercase
    /// letter or digit and up to 240 more, `@`, a lowercase letter and up to 13 more; a value of
    /// 1–256 printable ASCII characters but `,` and `=`, not ending in a space.
    static func isValid(member: String) -> Bool {
        let b = Array(member.utf8)
        guard let eq = b.firstIndex(of: 0x3D) else { return false }
        let key = b[..<eq], value = b[(eq + 1)...]
        let lower = { (c: UInt8) in c >= 0x61 && c <= 0x7A }
        let digit = { (c: UInt8) in c >= 0x30 && c <= 0x39 }
        let keyChar = { (c: UInt8) in lower(c) || digit(c) || c == 0x5F || c == 0x2D || c == 0x2A || c == 0x2F }
        let parts = key.split(separator: 0x40, omittingEmptySubsequences: false)
        guard let tenant = parts.first, let first = tenant.first, tenant.allSatisfy(keyChar) else { return false }
        switch parts.count {
        case 1:
            guard lower(first), tenant.count <= 256 else { return false }
        case 2:
            let system = parts[1]
            guard lower(first) || digit(first), tenant.count <= 241, let s = system.first, lower(s), system.count <= 14,
                system.allSatisfy(keyChar)
            else { return false }
        default:
            return false
        }
        guard (1...256).contains(value.count), let last = value.last, last != 0x20 else { return false }
        return value.allSatisfy { $0 >= 0x20 && $0 <= 0x7E && $0 != 0x2C && $0 != 0x3D }
    }

    private static func quoted(_ s: String) -> String { "'" + String(s.prefix(80)) + "'" }
}

/// A malformed trace context, with why.
public struct TraceContextError: Error, Sendable, CustomStringConvertible {
    public var reason: String
    public var description: String { reason }
}
