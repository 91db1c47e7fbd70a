import Foundation
import HalcyonQueue

/// Building pages: every value from a job row goes through `escape` (text and attributes
/// alike), so a source or error holding markup renders as text.
enum HTML {
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for c in text.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

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

    /// The whole page: header, navigation, `main`. `live` pages reload their `main` every
    /// `interval` seconds (dashboard.js; nothing happens without JavaScript).
    static func page(title: String, active: String, live: Int?, main: String) -> String {
        func nav(_ href: String, _ label: String) -> String {
            "<a href=\"\(href)\"\(active == label ? " aria-current=\"page\"" : "")>\(label)</a>"
        }
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(escape(title)) · Halcyon</title><link rel="stylesheet" href="/assets/dashboard.css"><script src="/assets/dashboard.js" defer></script></head>
            <body\(live.map { " data-live=\"\($0)\"" } ?? "")><header><span class="brand">Halcyon</span><nav>\(nav("/", "Overview"))\(nav("/jobs", "Jobs"))</nav></header>
            <main id="main">\(main)</main></body></html>
            """
    }

    /// A POST form with the CSRF token and one button; `confirm` asks first (with JavaScript).
    static func button(
        action: String, label: String, csrf: String, fields: [(String, String)] = [], danger: Bool = false, confirm: String? = nil
    ) -> String {
        let hidden = fields.map { "<input type=\"hidden\" name=\"\(escape($0.0))\" value=\"\(escape($0.1))\">" }.joined()
        let ask = confirm.map { " data-confirm=\"\(escape($0))\"" } ?? ""
        return "<form method=\"post\" action=\"\(escape(action))\" class=\"inline\"\(ask)><input type=\"hidden\" name=\"csrf\" value=\"\(csrf)\">"
            + hidden + "<button type=\"submit\"\(danger ? " class=\"danger\"" : "")>\(escape(label))</button></form>"
    }

    static func badge(_ state: String) -> String { "<span class=\"badge \(escape(state))\">\(escape(state))</span>" }

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

    /// A PostgreSQL timestamp to the second ("2026-11-23 20:01:05").
    static func time(_ text: String?) -> String {
        guard let text, !text.isEmpty else { return "—" }
        return escape(String(text.prefix(19)))
    }

    /// Text cut to `limit` characters with an ellipsis; the whole text in the title.
    static func clipped(_ text: String, _ limit: Int) -> String {
        text.count <= limit
            ? escape(text) : "<span title=\"\(escape(String(text.prefix(4096))))\">\(escape(String(text.prefix(limit))))…</span>"
    }
}
