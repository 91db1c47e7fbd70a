import Foundation
import HalcyonCore
import HalcyonQueue

/// `/`: counts by state and queue, the last hour's throughput, failures by code, workers, the
/// store against its limit, paused queues.
enum OverviewPage {
    static func render(_ o: QueueOverview, now: Date) -> String {
        var html =
            "<h1>Overview</h1><p class=\"muted\">as of \(HTML.escape(ISO8601.format(now).prefix(19).replacingOccurrences(of: "T", with: " "))) UTC"
        html += " · counts stop at \(HTML.grouped(o.cap)) per state (“+”); “≈” is the table’s estimate</p>"

        html += "<div class=\"cards\">"
        for state in JobState.allCases {
            let c = o.counts[state] ?? QueueOverview.Count(0)
            html +=
                "<a class=\"card\" href=\"/jobs?state=\(state.rawValue)\"><div class=\"n\" data-state=\"\(state.rawValue)\">\(HTML.count(c))</div>"
                + "<div class=\"l\">\(HTML.badge(state.rawValue))</div></a>"
        }
        html += "</div>"

        let finished = o.throughput.reduce(0) { $0 + $1.succeeded + $1.failed + $1.cancelled }
        html += "<h2>Throughput, last hour</h2><p class=\"muted\">\(HTML.grouped(finished))\(o.throughputCapped ? "+" : "") jobs finished"
        html += o.throughputCapped ? " (the chart reads the latest \(HTML.grouped(2 * o.cap)))" : ""
        html += "</p>" + Charts.throughput(o.throughput, now: now)

        let paused = o.queues.filter(\.paused)
        html += "<div class=\"grid\"><section><h2>Queues</h2>"
        if !paused.isEmpty {
            html +=
                "<p>Paused: " + paused.map { "<a href=\"/jobs?queue=\(HTML.percent($0.name))\">\(HTML.escape($0.name))</a>" }.joined(separator: ", ")
                + "</p>"
        }
        html +=
            "<table><thead><tr><th>queue</th><th></th><th class=\"num\">queued</th><th class=\"num\">running</th>"
            + "<th class=\"num\">failed</th><th class=\"num\">cancelled</th></tr></thead><tbody>"
        for q in o.queues {
            html += "<tr><td><a href=\"/jobs?queue=\(HTML.percent(q.name))\">\(HTML.escape(q.name))</a></td><td>"
            html += q.paused ? HTML.badge("paused") + (q.pausedFor.map { " <span class=\"muted\">\(HTML.age($0))</span>" } ?? "") : ""
            html += "</td>"
            for s: JobState in [.queued, .running, .failed, .cancelled] {
                let c = q.counts[s] ?? QueueOverview.Count(0)
                html +=
                    "<td class=\"num\">\(c.value == 0 ? "<span class=\"muted\">0</span>" : "<a href=\"/jobs?state=\(s.rawValue)&amp;queue=\(HTML.percent(q.name))\">\(HTML.count(c))</a>")</td>"
            }
            html += "</tr>"
        }
        html += "</tbody></table></section>"

        html += "<section><h2>Failures, last 24 hours</h2>"
        if o.failures.isEmpty {
            html += "<p class=\"muted\">no job failed in the last 24 hours</p>"
        } else {
            html += "<table><thead><tr><th>code</th><th class=\"num\">jobs</th><th>latest message</th><th>last seen</th></tr></thead><tbody>"
            for f in o.failures {
                let seen = f.latestJob.map { "<a href=\"/jobs/\($0)\">\(HTML.time(f.lastSeen))</a>" } ?? HTML.time(f.lastSeen)
                html += "<tr><td><a href=\"/jobs?state=failed&amp;code=\(HTML.percent(f.code))&amp;since=24h\">\(HTML.escape(f.code))</a></td>"
                html += "<td class=\"num\">\(HTML.grouped(f.count))</td><td>\(HTML.clipped(f.latestMessage, 120))</td><td>\(seen)</td></tr>"
            }
            html += "</tbody></table>"
            if o.failuresCapped { html += "<p class=\"muted\">from the latest \(HTML.grouped(o.cap)) failures</p>" }
        }
        html += "</section></div>"

        html += "<div class=\"grid\"><section><h2>Workers</h2>"
        if o.workers.isEmpty {
            html += "<p class=\"muted\">no worker has run in the last hour</p>"
        } else {
            html +=
                "<table><thead><tr><th>worker</th><th></th><th>heartbeat</th><th class=\"num\">slots</th><th class=\"num\">done</th>"
                + "<th class=\"num\">failed</th><th class=\"num\">restarts</th></tr></thead><tbody>"
            for w in o.workers {
                html +=
                    "<tr><td>\(HTML.escape(w.id))<br><span class=\"muted\">\(HTML.escape(w.host)) pid \(w.pid)</span></td>"
                    + "<td>\(HTML.badge(w.status.rawValue))</td><td>\(HTML.age(w.heartbeatAge))</td><td class=\"num\">\(w.concurrency)</td>"
                    + "<td class=\"num\">\(HTML.grouped(w.done))</td><td class=\"num\">\(HTML.grouped(w.failed))</td>"
                    + "<td class=\"num\"\(w.lastCrash.map { " title=\"last: \(HTML.escape($0))\"" } ?? "")>\(HTML.grouped(w.restarts))</td></tr>"
            }
            html += "</tbody></table>"
        }
        html += "</section><section><h2>Store</h2>"
        if let s = o.store {
            html += "<p>\(HTML.bytes(s.bytes)) in \(HTML.grouped(s.files)) files"
            if let limit = s.sizeLimit {
                html += " of \(HTML.bytes(limit))</p>" + Charts.usage(s.bytes, of: limit)
            } else {
                html += ", no size limit</p>"
            }
            html += "<p class=\"muted\">at \(HTML.escape(s.root)), as the last sweep (\(HTML.escape(s.sweptBy)), \(HTML.age(s.age))) left it</p>"
        } else {
            html += "<p class=\"muted\">never swept: its size is known after the first sweep (<code>halcyon sweep</code>, or a worker’s)</p>"
        }
        html += "</section></div>"
        return html
    }
}
