import Foundation

/// Parses and prints the duration strings used on the command line and in `options`:
/// `250ms`, `30s`, `10m`, `12h`, `7d` (a bare number means seconds; decimals allowed).
public enum TimeSpan {
    /// Seconds for a duration string, or nil when it is not one.
    public static func parse(_ text: String) -> Double? {
        let s = text.trimmingCharacters(in: .whitespaces).lowercased()
        guard !s.isEmpty else { return nil }
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400)]
        for (suffix, scale) in units where s.hasSuffix(suffix) {
            let number = s.dropLast(suffix.count)
            // "ms" must not be read as minutes of "…m" + "s".
            if suffix == "s", number.hasSuffix("m") { continue }
            guard let value = Double(number), value.isFinite, value >= 0 else { return nil }
            return value * scale
        }
        guard let value = Double(s), value.isFinite, value >= 0 else { return nil }
        return value
    }

    /// A compact rendering: `1.5s`, `2m`, `3h`, `7d`.
    public static func format(_ seconds: Double) -> String {
        guard seconds.isFinite, abs(seconds) < 1e15 else { return "\(seconds)s" }
        if seconds == 0 { return "0s" }
        if seconds < 1 { return "\(Int((seconds * 1000).rounded()))ms" }
        for (suffix, scale) in [("d", 86400.0), ("h", 3600), ("m", 60)] where seconds >= scale && seconds.truncatingRemainder(dividingBy: scale) == 0
        {
            return "\(Int(seconds / scale))\(suffix)"
        }
        let rounded = (seconds * 10).rounded() / 10
        return rounded == rounded.rounded() ? "\(Int(rounded))s" : "\(rounded)s"
    }
}

/// Parses byte sizes: `512`, `64KiB`, `50MiB`, `2GiB`, `1TiB`, `1PiB` (KB/MB/GB/TB/PB are read
/// as powers of 1000), up to 1 EiB.
public enum ByteSize {
    /// The largest size read: 1 EiB (2⁶⁰ bytes), far from `Int`'s end.
    public static let maximum = 1 << 60

    public static func parse(_ text: String) -> Int? {
        let s = text.trimmingCharacters(in: .whitespaces)
        let units: [(String, Double)] = [
            ("kib", 1024), ("mib", 1_048_576), ("gib", 1_073_741_824), ("tib", 1_099_511_627_776), ("pib", 1_125_899_906_842_624),
            ("kb", 1e3), ("mb", 1e6), ("gb", 1e9), ("tb", 1e12), ("pb", 1e15),
            ("k", 1024), ("m", 1_048_576), ("g", 1_073_741_824), ("t", 1_099_511_627_776), ("p", 1_125_899_906_842_624), ("b", 1),
        ]
        let lower = s.lowercased()
        for (suffix, scale) in units where lower.hasSuffix(suffix) {
            guard let n = Double(lower.dropLast(suffix.count)), n.isFinite, n >= 0, n * scale <= Double(maximum) else { return nil }
            return Int(n * scale)
        }
        guard let n = Int(lower), n >= 0, n <= maximum else { return nil }
        return n
    }

    /// `50MiB` when a whole number of a unit, else `format(_:)`'s `1.5 MiB`: how an option's
    /// value is written back.
    public static func formatExact(_ value: Int) -> String {
        if value < 1024 { return "\(value)" }
        for (unit, scale) in [("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)]
        where value >= scale && value % scale == 0 {
            return "\(value / scale)\(unit)"
        }
        return format(Int64(value))
    }

    /// `512 B`, `1.5 KiB`, `12.3 MiB`, `4.0 GiB`.
    public static func format(_ bytes: Int64) -> String {
        let units = ["KiB", "MiB", "GiB", "TiB", "PiB"]
        guard bytes >= 1024 else { return "\(bytes) B" }
        var value = Double(bytes) / 1024, unit = 0
        while value >= 1024, unit < units.count - 1 { value /= 1024; unit += 1 }
        return String(format: "%.1f ", value) + units[unit]
    }
}

extension TimeSpan {
    /// `250ms`, `30s`, `10m` — `format(_:)` of a `Duration`.
    public static func format(_ duration: Duration) -> String { format(duration.seconds) }
}

extension Duration {
    /// The duration in seconds.
    public var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
    /// Whole nanoseconds, saturating at `Int64`'s ends (for NIO's `TimeAmount`, Dispatch, libcurl).
    public var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (sum, carried) = product.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflow || carried ? (seconds < 0 ? .min : .max) : sum
    }
    /// `n` days.
    public static func days(_ n: Int64) -> Duration { .seconds(n * 86_400) }
    /// `n` hours.
    public static func hours(_ n: Int64) -> Duration { .seconds(n * 3600) }
    /// `n` minutes.
    public static func minutes(_ n: Int64) -> Duration { .seconds(n * 60) }
}

/// Pixel counts: `25000000`, `25MP` (megapixels), `500KP`.
public enum PixelCount {
    public static func parse(_ text: String) -> Int? {
        let lower = text.lowercased().trimmingCharacters(in: .whitespaces)
        let (number, scale): (Substring, Double) =
            lower.hasSuffix("mp")
            ? (lower.dropLast(2), 1e6)
            : lower.hasSuffix("kp") ? (lower.dropLast(2), 1e3) : (Substring(lower), 1)
        guard let n = Double(number), n.isFinite, n >= 0, n * scale < 1e15 else { return nil }
        return Int(n * scale)
    }

    /// `25MP` when a whole number of megapixels, else the number.
    public static func format(_ value: Int) -> String {
        value >= 1_000_000 && value % 1_000_000 == 0 ? "\(value / 1_000_000)MP" : "\(value)"
    }
}
