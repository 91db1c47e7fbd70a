import Foundation
import HalcyonRuntime

/// How long a stored result lives (Kingfisher's `StorageExpiration`). The store keeps the
/// expiry instant in a file's mtime (see `HalcyonStore/FileTimes.swift`).
public enum StorageExpiration: Sendable, Equatable {
    case never
    case seconds(Double)
    case days(Int)
    case date(Date)
    /// Do not cache: the result is written (the job needs it) but no key maps to it, and it is
    /// already expired, so the next sweep removes it.
    case expired

    /// The instant that stands for "never" in an mtime: 2400-01-01T00:00:00Z. Anything at or
    /// after it is never expired and never moved by `cache_time` extension.
    public static let neverInstant = Date(timeIntervalSince1970: 13_569_465_600)

    /// Parses `never`, `expired`, whole days (`7d`), another duration (`30s`, `10m`, `12h`) or an
    /// ISO-8601 instant.
    public static func parse(_ text: String) -> StorageExpiration? {
        switch text.lowercased() {
        case "never": return .never
        case "expired": return .expired
        default:
            if text.hasSuffix("d"), let days = Int(text.dropLast()), days >= 0 { return .days(days) }
            if let seconds = TimeSpan.parse(text) { return .seconds(seconds) }
            if let date = ISO8601.parse(text) { return .date(date) }
            return nil
        }
    }

    /// When an item stored at `now` expires: `never` is `neverInstant`, `expired` is `now`, and
    /// nothing is later than `neverInstant`.
    public func expiry(from now: Date) -> Date {
        let instant: Date
        switch self {
        case .never: return Self.neverInstant
        case .seconds(let s): instant = now.addingTimeInterval(s)
        case .days(let d): instant = now.addingTimeInterval(Double(d) * 86_400)
        case .date(let d): instant = d
        case .expired: instant = now
        }
        return min(instant, Self.neverInstant)
    }

    public var isExpired: Bool { self == .expired }
}

/// What a store hit does to the expiry (Kingfisher's `ExpirationExtending`).
public enum ExpirationExtending: Sendable, Equatable {
    /// Leave both times as they are.
    case none
    /// Restart the item's own time to live from now: atime = now, mtime = now + (mtime − atime).
    case cacheTime
    /// atime = now, and a new expiry counted from now.
    case expiration(StorageExpiration)

    public static func parse(_ text: String) -> ExpirationExtending? {
        switch text.lowercased() {
        case "none": return ExpirationExtending.none
        case "cache_time": return .cacheTime
        default: return StorageExpiration.parse(text).map { .expiration($0) }
        }
    }

    /// The new (last access, expiry) of an item hit at `now` whose times were
    /// (`accessed`, `expires`); nil means leave them.
    public func extended(accessed: Date, expires: Date, now: Date) -> (accessed: Date, expires: Date)? {
        switch self {
        case .none:
            return nil
        case .cacheTime:
            if expires >= StorageExpiration.neverInstant { return (now, StorageExpiration.neverInstant) }
            let ttl = max(0, expires.timeIntervalSince(accessed))
            return (now, min(now.addingTimeInterval(ttl), StorageExpiration.neverInstant))
        case .expiration(let e):
            return (now, e.expiry(from: now))
        }
    }
}
