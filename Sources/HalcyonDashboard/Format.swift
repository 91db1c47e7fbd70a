import Foundation
import HalcyonQueue
import HalcyonRuntime

/// How values read on the pages: counts, sizes, ages, times, and the links' query strings.
/// Plain text: the templates escape it (`{{ }}`).
enum Format {
    /// A URL's query from fields (empty values left out), percent-encoded.
    static func query(_ fields: [(String, String)]) -> String {
        let kept = fields.filter { !$0.1.isEmpty }
        guard !kept.isEmpty else { return "" }
        return "?" + kept.map { "\(percent($0.0))=\(percent($0.1))" }.joined(separator: "&")
    }

    static func percent(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    static func count(_ c: QueueOverview.Count) -> String {
        switch c.kind {
        case .exact: grouped(c.value)
        case .atLeast: grouped(c.value) + "+"
        case .estimate: "≈ " + grouped(c.value)
        }
    }

    static func grouped(_ n: some BinaryInteger) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (i, ch) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out += "," }
            out.append(ch)
        }
        return (n < 0 ? "-" : "") + out
    }

    static func bytes(_ n: Int64) -> String {
        let units = ["B", "KB", "MB", "GB", "TB"]
        var v = Double(n), u = 0
        while v >= 1000 && u < units.count - 1 {
            v /= 1000
            u += 1
        }
        return u == 0 ? "\(n) B" : String(format: "%.1f %@", v, units[u])
    }

    static func age(_ seconds: Double) -> String {
        let s = max(0, seconds)
        if s < 60 { return String(format: "%.0f s ago", s) }
        if s < 3600 { return String(format: "%.0f min ago", s / 60) }
        if s < 172_800 { return String(format: "%.1f h ago", s / 3600) }
        return String(format: "%.0f days ago", s / 86400)
    }

    /// A PostgreSQL timestamp to the second ("2026-11-23 20:01:05"); "—" for none.
    static func time(_ text: String?) -> String {
        guard let text, !text.isEmpty else { return "—" }
        return String(text.prefix(19))
    }

    /// An instant as UTC to the second ("2026-11-23 20:01:05").
    static func utc(_ date: Date) -> String {
        ISO8601.format(date).prefix(19).replacingOccurrences(of: "T", with: " ")
    }
}
