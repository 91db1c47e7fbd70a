import Foundation
import HalcyonCore
import HalcyonQueue
import HalcyonStore

/// `/jobs/ID`: inputs, the chain's canonical identifier, the result image with its expiry, the
/// source's facts, stage timings, every attempt's error, and retry/cancel.
enum JobPage {
    /// The row as `JobQueue.show` returns it, with what the dashboard adds.
    struct Model {
        var row: [String: String?]
        /// The chain's canonical identifier, or why it has none.
        var identifier: Result<String, HalcyonError>
        /// The stored result's expiry, nil when it is not in the store (swept, or another store).
        var resultExpires: Date?
        var resultInStore: Bool
    }

    static let stageOrder = ["queue_wait_ms", "fetch_ms", "decode_ms", "process_ms", "encode_ms", "store_ms"]

    static func render(_ m: Model, csrf: String, notice: String?) -> String {
        func v(_ c: String) -> String? { m.row[c] ?? nil }
        let id = v("id") ?? "?"
        let state = v("state") ?? "?"
        var html = "<h1>Job \(HTML.escape(id)) \(HTML.badge(state))</h1>"
        if let notice { html += "<p class=\"notice\" role=\"status\">\(HTML.escape(notice))</p>" }
        html += "<div class=\"actions\">"
        if ["failed", "cancelled"].contains(state) { html += HTML.button(action: "/jobs/\(id)/retry", label: "Retry", csrf: csrf) }
        if ["queued", "running"].contains(state) { html += HTML.button(action: "/jobs/\(id)/cancel", label: "Cancel", csrf: csrf, danger: true) }
        html += "<a href=\"/api/jobs/\(HTML.escape(id))\">JSON</a></div>"

        html += "<div class=\"grid\"><section><h2>Inputs</h2><dl class=\"kv\">"
        func row(_ label: String, _ value: String?) {
            html +=
                "<dt>\(label)</dt><dd>\(value.map { $0.isEmpty ? "<span class=\"muted\">—</span>" : $0 } ?? "<span class=\"muted\">—</span>")</dd>"
        }
        row("source", v("source").map(HTML.escape))
        let fallbacks = v("fallback_sources").map(PGRows.parseTextArray) ?? []
        if !fallbacks.isEmpty { row("fallback sources", fallbacks.map(HTML.escape).joined(separator: "<br>")) }
        row("processors", v("processors").map { "<code>\(HTML.escape($0))</code>" })
        switch m.identifier {
        case .success(let text): row("canonical identifier", "<code>\(HTML.escape(text))</code>")
        case .failure(let error): row("canonical identifier", "<span class=\"muted\">\(HTML.escape(error.description))</span>")
        }
        row("cache key", v("cache_key").map(HTML.escape))
        row("options", v("options").flatMap { $0 == "{}" ? nil : "<pre>\(HTML.escape(JSONValue.parse($0)?.prettyText ?? $0))</pre>" })
        row("queue", v("queue").map { "<a href=\"/jobs?queue=\(HTML.percent($0))\">\(HTML.escape($0))</a>" })
        let tags = v("tags").map(PGRows.parseTextArray) ?? []
        row("tags", tags.map { "<a href=\"/jobs?tag=\(HTML.percent($0))\">\(HTML.escape($0))</a>" }.joined(separator: ", "))
        row("unique key", v("unique_key").map(HTML.escape))
        row("priority", v("priority").map(HTML.escape))
        row("attempts", "\(HTML.escape(v("attempt") ?? "0")) of \(HTML.escape(v("max_attempts") ?? "?"))")
        row("created", HTML.time(v("created_at")))
        row("run at", HTML.time(v("run_at")))
        row("started", HTML.time(v("started_at")))
        row("finished", HTML.time(v("finished_at")))
        if let by = v("locked_by") { row("running on", "\(HTML.escape(by)) until \(HTML.time(v("locked_until")))") }
        if let status = v("callback_status") {
            row(
                "webhook",
                "\(HTML.escape(status)), \(HTML.escape(v("callback_attempts") ?? "0")) attempts"
                    + (v("callback_error").map { ": " + HTML.escape($0) } ?? ""))
        }
        html += "</dl></section><section><h2>Result</h2>"
        if let digest = v("result_digest") {
            if m.resultInStore {
                html +=
                    "<p><a href=\"/results/\(HTML.escape(digest))\"><img class=\"result\" src=\"/results/\(HTML.escape(digest))\" alt=\"result of job \(HTML.escape(id))\"></a></p>"
            } else {
                html += "<p class=\"muted\">not in this dashboard's store (swept, or stored elsewhere)</p>"
            }
            html += "<dl class=\"kv\">"
            row("digest", "<code>\(HTML.escape(digest))</code>")
            row(
                "image",
                [v("result_format"), v("result_width").map { w in "\(w)×\(v("result_height") ?? "?")" }].compactMap { $0 }.map(HTML.escape).joined(
                    separator: " "))
            row("bytes", v("result_bytes").flatMap { Int64($0) }.map { HTML.bytes($0) })
            row("store hit", v("cache_hit").map { $0 == "t" ? "yes" : "no" })
            row("made from", v("result_source").map(HTML.escape))
            row("expires", m.resultExpires.map { HTML.escape(ISO8601.format($0).prefix(19).replacingOccurrences(of: "T", with: " ")) + " UTC" })
            row("path", v("result_path").map(HTML.escape))
            html += "</dl>"
        } else {
            html += "<p class=\"muted\">no result yet</p>"
        }
        html += "</section></div>"

        html += "<div class=\"grid\"><section><h2>Source</h2>"
        if v("source_width") != nil || v("source_format") != nil {
            html += "<dl class=\"kv\">"
            row(
                "image",
                [v("source_format"), v("source_width").map { w in "\(w)×\(v("source_height") ?? "?")" }].compactMap { $0 }.map(HTML.escape).joined(
                    separator: " "))
            row("bytes", v("source_bytes").flatMap { Int64($0) }.map { HTML.bytes($0) })
            if let meta = v("source_meta") { row("metadata", "<pre>\(HTML.escape(JSONValue.parse(meta)?.prettyText ?? meta))</pre>") }
            if let p = v("placeholders") { row("placeholders", "<pre>\(HTML.escape(JSONValue.parse(p)?.prettyText ?? p))</pre>") }
            html += "</dl>"
        } else {
            html += "<p class=\"muted\">not read yet</p>"
        }
        html += "</section><section><h2>Stage timings (latest attempt, ms)</h2>"
        if let t = v("timings"), case .object(let o)? = JSONValue.parse(t) {
            let stages = stageOrder.compactMap { k in o[k]?.numberValue.map { (k.dropLast(3).replacingOccurrences(of: "_", with: " "), $0) } }
            html += Charts.stages(stages)
            if let total = o["total_ms"]?.numberValue { html += "<p class=\"muted\">total \(String(format: "%.1f", total)) ms</p>" }
        } else {
            html += "<p class=\"muted\">none</p>"
        }
        html += "</section></div>"

        html += "<h2>Errors</h2>"
        let errors = v("errors").flatMap { JSONValue.parse($0)?.arrayValue } ?? []
        if errors.isEmpty {
            html += "<p class=\"muted\">none</p>"
        } else {
            html += "<table><thead><tr><th class=\"num\">attempt</th><th>at</th><th>code</th><th>message</th><th>per source</th></tr></thead><tbody>"
            for e in errors.reversed() {
                var detail = ""
                for s in e["sources"]?.arrayValue ?? [] {
                    detail +=
                        "<div>\(HTML.clipped(s["source"]?.stringValue ?? "?", 60)): <code>\(HTML.escape(s["code"]?.stringValue ?? "?"))</code> "
                        + "\(HTML.clipped(s["message"]?.stringValue ?? "", 200)) (\(Int(saturating: s["attempts"]?.numberValue ?? 0)) tries"
                        + "\(s["permanent"]?.boolValue == true ? ", permanent" : ""))</div>"
                }
                if detail.isEmpty, let s = e["source"]?.stringValue { detail = HTML.clipped(s, 60) }
                html +=
                    "<tr><td class=\"num\">\(Int(saturating: e["attempt"]?.numberValue ?? 0))</td><td>\(HTML.time(e["at"]?.stringValue))</td>"
                    + "<td><code>\(HTML.escape(e["code"]?.stringValue ?? "?"))</code></td><td>\(HTML.escape(e["message"]?.stringValue ?? ""))</td><td>\(detail)</td></tr>"
            }
            html += "</tbody></table>"
        }
        return html
    }
}
