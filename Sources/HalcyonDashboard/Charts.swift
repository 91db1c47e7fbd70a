import Foundation
import HalcyonQueue

/// The geometry of the inline SVG charts (templates `throughput`, `stages`, `usage`):
/// presentation attributes only, no inline style (the CSP forbids it). Coordinates and figures
/// are strings already (`f`).
enum Charts {
    static let ok = "#12a150", bad = "#d92d20", off = "#98a2b3", run = "#2e90fa"

    /// Finished jobs per minute over the hour ending `now`: one stacked bar per minute.
    struct Throughput {
        struct Segment {
            let y: String
            let h: String
            let fill: String
        }
        struct Bar {
            let x: String
            let w: String
            let segments: [Segment]
            let label: String
        }
        let width = 720, height = 140, left = 40
        let axis: String
        let plot: String
        let peak: String
        let nowX: Int
        let labelY: Int
        let bars: [Bar]
    }

    static func throughput(_ minutes: [QueueOverview.Minute], now: Date) -> Throughput {
        let width = 720.0, height = 140.0, left = 40.0, bottom = 18.0
        let end = Int64(now.timeIntervalSince1970) / 60 * 60
        let byStart = Dictionary(minutes.map { ($0.start, $0) }, uniquingKeysWith: { a, _ in a })
        let peak = max(1, minutes.map { $0.succeeded + $0.failed + $0.cancelled }.max() ?? 1)
        let slot = (width - left) / 60
        var bars: [Throughput.Bar] = []
        for i in 0..<60 {
            let start = end - Int64(59 - i) * 60
            guard let m = byStart[start] else { continue }
            let x = left + Double(i) * slot + 1
            var y = height - bottom
            var segments: [Throughput.Segment] = []
            for (n, color) in [(m.succeeded, ok), (m.failed, bad), (m.cancelled, off)] where n > 0 {
                let h = (height - bottom - 8) * Double(n) / Double(peak)
                y -= h
                segments.append(Throughput.Segment(y: f(y), h: f(h), fill: color))
            }
            let total = m.succeeded + m.failed + m.cancelled
            bars.append(
                Throughput.Bar(
                    x: f(x), w: f(slot - 2), segments: segments,
                    label: "\(clock(start)): \(total) finished (\(m.succeeded) succeeded, \(m.failed) failed, \(m.cancelled) cancelled)"))
        }
        return Throughput(
            axis: f(height - bottom), plot: f(height - bottom - 8), peak: Format.grouped(peak), nowX: Int(width) - 30, labelY: Int(height) - 4,
            bars: bars)
    }

    /// A horizontal stacked bar of stage times (milliseconds), with a legend.
    struct Stages {
        struct Bar {
            let x: String
            let w: String
            let fill: String
            let name: String
            let ms: String
        }
        struct Key {
            let x: String
            let textX: String
            let fill: String
            let label: String
        }
        /// No stage took any time.
        let empty: Bool
        let width: Int
        let bars: [Bar]
        let legend: [Key]
    }

    static func stages(_ stages: [(name: String, ms: Double)]) -> Stages {
        let total = stages.reduce(0) { $0 + $1.ms }
        guard total > 0 else { return Stages(empty: true, width: 0, bars: [], legend: []) }
        let colors = ["#98a2b3", "#2e90fa", "#7a5af8", "#12a150", "#f79009", "#ee46bc", "#d92d20"]
        let width = 640.0
        var x = 0.0, legendX = 0.0
        var bars: [Stages.Bar] = [], legend: [Stages.Key] = []
        for (i, s) in stages.enumerated() where s.ms > 0 {
            let w = max(1, width * s.ms / total)
            let color = colors[i % colors.count]
            bars.append(Stages.Bar(x: f(x), w: f(w), fill: color, name: s.name, ms: f(s.ms)))
            let label = "\(s.name) \(f(s.ms))"
            legend.append(Stages.Key(x: f(legendX), textX: f(legendX + 14), fill: color, label: label))
            legendX += 26 + 6.2 * Double(label.count)
            x += w
        }
        return Stages(empty: false, width: Int(max(width, legendX)), bars: bars, legend: legend)
    }

    /// Used against limit, as a bar.
    struct Usage {
        /// The limit, as the page says it.
        let limitText: String
        let width: String
        let color: String
    }

    static func usage(_ used: Int64, of limit: Int64) -> Usage {
        let fraction = min(1, Double(used) / Double(max(1, limit)))
        let color = fraction > 0.9 ? bad : fraction > 0.7 ? "#f79009" : run
        return Usage(limitText: Format.bytes(limit), width: f(300 * fraction), color: color)
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
