import Foundation
import HalcyonQueue

/// Inline SVG charts (presentation attributes only, no inline style: the CSP forbids it).
enum Charts {
    static let ok = "#12a150", bad = "#d92d20", off = "#98a2b3", run = "#2e90fa"

    /// Finished jobs per minute over the hour ending `now`: one stacked bar per minute.
    static func throughput(_ minutes: [QueueOverview.Minute], now: Date) -> String {
        let width = 720.0, height = 140.0, left = 40.0, bottom = 18.0
        let end = Int64(now.timeIntervalSince1970) / 60 * 60
        let byStart = Dictionary(minutes.map { ($0.start, $0) }, uniquingKeysWith: { a, _ in a })
        let peak = max(1, minutes.map { $0.succeeded + $0.failed + $0.cancelled }.max() ?? 1)
        let slot = (width - left) / 60
        var bars = ""
        for i in 0..<60 {
            let start = end - Int64(59 - i) * 60
            guard let m = byStart[start] else { continue }
            let x = left + Double(i) * slot + 1
            var y = height - bottom
            for (n, color) in [(m.succeeded, ok), (m.failed, bad), (m.cancelled, off)] where n > 0 {
                let h = (height - bottom - 8) * Double(n) / Double(peak)
                y -= h
                bars += "<rect x=\"\(f(x))\" y=\"\(f(y))\" width=\"\(f(slot - 2))\" height=\"\(f(h))\" fill=\"\(color)\"></rect>"
            }
            let total = m.succeeded + m.failed + m.cancelled
            bars +=
                "<rect x=\"\(f(x))\" y=\"8\" width=\"\(f(slot - 2))\" height=\"\(f(height - bottom - 8))\" fill=\"transparent\">"
                + "<title>\(HTML.escape(clock(start))): \(total) finished (\(m.succeeded) succeeded, \(m.failed) failed, \(m.cancelled) cancelled)</title></rect>"
        }
        let axis = height - bottom
        return """
            <svg class="chart" width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" role="img" aria-label="jobs finished per minute, last hour">\
            <line x1="\(Int(left))" y1="\(f(axis))" x2="\(Int(width))" y2="\(f(axis))" stroke="#d0d5dd"></line>\
            <text x="0" y="14">\(HTML.grouped(peak))/min</text><text x="0" y="\(f(axis))">0</text>\
            <text x="\(Int(left))" y="\(Int(height) - 4)">−60 min</text><text x="\(Int(width) - 30)" y="\(Int(height) - 4)">now</text>\
            \(bars)</svg>
            """
    }

    /// A horizontal stacked bar of stage times (milliseconds), with a legend.
    static func stages(_ stages: [(name: String, ms: Double)]) -> String {
        let total = stages.reduce(0) { $0 + $1.ms }
        guard total > 0 else { return "<p class=\"muted\">no stage timings</p>" }
        let colors = ["#98a2b3", "#2e90fa", "#7a5af8", "#12a150", "#f79009", "#ee46bc", "#d92d20"]
        let width = 640.0
        var x = 0.0, bars = "", legend = "", legendX = 0.0
        for (i, s) in stages.enumerated() where s.ms > 0 {
            let w = max(1, width * s.ms / total)
            let color = colors[i % colors.count]
            bars +=
                "<rect x=\"\(f(x))\" y=\"0\" width=\"\(f(w))\" height=\"22\" fill=\"\(color)\"><title>\(HTML.escape(s.name)): \(f(s.ms)) ms</title></rect>"
            let label = "\(s.name) \(f(s.ms))"
            legend +=
                "<rect x=\"\(f(legendX))\" y=\"30\" width=\"10\" height=\"10\" fill=\"\(color)\"></rect>"
                + "<text x=\"\(f(legendX + 14))\" y=\"39\">\(HTML.escape(label))</text>"
            legendX += 26 + 6.2 * Double(label.count)
            x += w
        }
        return "<svg width=\"\(Int(max(width, legendX)))\" height=\"46\" role=\"img\" aria-label=\"stage timings\">\(bars)\(legend)</svg>"
    }

    /// Used against limit, as a bar.
    static func usage(_ used: Int64, of limit: Int64) -> String {
        let fraction = min(1, Double(used) / Double(max(1, limit)))
        let color = fraction > 0.9 ? bad : fraction > 0.7 ? "#f79009" : run
        return
            "<svg width=\"300\" height=\"12\" role=\"img\" aria-label=\"store use\"><rect width=\"300\" height=\"12\" rx=\"6\" fill=\"#e4e7ec\"></rect>"
            + "<rect width=\"\(f(300 * fraction))\" height=\"12\" rx=\"6\" fill=\"\(color)\"></rect></svg>"
    }

    /// A coordinate or a figure: whole numbers without a fraction. Any double (a timing read
    /// from a row may be 1e300) prints.
    static func f(_ v: Double) -> String {
        v == v.rounded() && abs(v) < 1e15 ? String(Int(v)) : String(format: "%.1f", v)
    }

    /// `14:05 UTC` for a Unix time.
    private static func clock(_ unix: Int64) -> String {
        let minutes = (unix % 86400 + 86400) % 86400 / 60
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(two(minutes / 60)):\(two(minutes % 60)) UTC"
    }
}
