import Foundation
import HalcyonCore
import HalcyonQueue

/// What the jobs list is filtered by: the query of `/jobs` and the fields of its bulk forms.
struct JobsFilter: Sendable {
    var state: JobState?
    var queue: String?
    var code: String?
    var tag: String?
    var source: String?
    var since: Since?
    /// A time range [from, to) of when jobs finished (unfinished: were created), UTC.
    var from: Date?
    var to: Date?

    enum Since: String, CaseIterable, Sendable {
        case m15 = "15m", h1 = "1h", h24 = "24h", d7 = "7d", d30 = "30d"
        var duration: Duration {
            switch self {
            case .m15: .seconds(900)
            case .h1: .seconds(3600)
            case .h24: .seconds(86400)
            case .d7: .seconds(7 * 86400)
            case .d30: .seconds(30 * 86400)
            }
        }
    }

    /// A text filter's length, at most.
    static let maxFieldLength = 1024

    /// Reads the fields; a message for a bad one.
    init(_ fields: [(name: String, value: String)]) throws(DashboardRefusal) {
        func value(_ name: String) throws(DashboardRefusal) -> String? {
            guard let v = fields.last(where: { $0.name == name })?.value.trimmingCharacters(in: .whitespaces), !v.isEmpty else { return nil }
            guard v.count <= Self.maxFieldLength else { throw DashboardRefusal(400, "the \(name) filter is over \(Self.maxFieldLength) characters") }
            return v
        }
        if let s = try value("state") {
            guard let state = JobState(rawValue: s) else { throw DashboardRefusal(400, "unknown state '\(s)'") }
            self.state = state
        }
        if let s = try value("since") {
            guard let since = Since(rawValue: s) else { throw DashboardRefusal(400, "since must be one of 15m, 1h, 24h, 7d, 30d") }
            self.since = since
        }
        queue = try value("queue")
        code = try value("code")
        tag = try value("tag")
        source = try value("source")
        for (name, bound) in [("from", \JobsFilter.from), ("to", \JobsFilter.to)] as [(String, WritableKeyPath<JobsFilter, Date?>)] {
            guard let text = try value(name) else { continue }
            guard let date = Self.instant(text) else {
                throw DashboardRefusal(400, "\(name) must be a date and time like 2026-11-23T14:30 (UTC) or an ISO-8601 instant")
            }
            self[keyPath: bound] = date
        }
    }

    /// `2026-11-23T14:30` (what a datetime-local input sends; read as UTC), with seconds, a
    /// bare date, or an ISO-8601 instant with its offset.
    static func instant(_ text: String) -> Date? {
        if let d = ISO8601.parse(text) { return d }
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        for format in ["yyyy-MM-dd'T'HH:mm", "yyyy-MM-dd'T'HH:mm:ss", "yyyy-MM-dd HH:mm", "yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd"] {
            f.dateFormat = format
            if let d = f.date(from: text) { return d }
        }
        return nil
    }

    /// How a datetime-local input shows `date` (UTC, to the second).
    static func local(_ date: Date?) -> String {
        guard let date else { return "" }
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyy-MM-dd'T'HH:mm:ss"
        return f.string(from: date)
    }

    init() {}

    /// The queue's filter: a chosen state, or all of them.
    var jobFilter: JobQueue.JobFilter {
        JobQueue.JobFilter(
            states: state.map { [$0] } ?? JobState.allCases, code: code, since: since?.duration, queue: queue, tag: tag, sourceContains: source,
            from: from, to: to)
    }

    var fields: [(String, String)] {
        [
            ("state", state?.rawValue ?? ""), ("queue", queue ?? ""), ("code", code ?? ""), ("tag", tag ?? ""), ("source", source ?? ""),
            ("since", since?.rawValue ?? ""), ("from", Self.local(from)), ("to", Self.local(to)),
        ]
    }
}

/// `/jobs`: the filter form, bulk retry and cancel for the filter, and a page of jobs with a
/// thumbnail of each stored result.
enum JobsPage {
    static func render(
        filter: JobsFilter, page: JobQueue.JobPage, matching: Int, cap: Int, before: Int64?, csrf: String, notice: String?
    ) -> String {
        var html = "<h1>Jobs</h1>"
        if let notice { html += "<p class=\"notice\" role=\"status\">\(HTML.escape(notice))</p>" }
        html += "<form class=\"filters\" method=\"get\" action=\"/jobs\">"
        html += "<label>state<select name=\"state\"><option value=\"\">any</option>"
        for s in JobState.allCases {
            html += "<option\(filter.state == s ? " selected" : "")>\(s.rawValue)</option>"
        }
        html += "</select></label>"
        for (name, value, hint) in [
            ("queue", filter.queue, "default"), ("code", filter.code, "fetch.http_status"), ("tag", filter.tag, ""),
            ("source", filter.source, "part of the URL"),
        ] {
            html +=
                "<label>\(name)<input name=\"\(name)\" value=\"\(HTML.escape(value ?? ""))\" placeholder=\"\(hint)\" maxlength=\"\(JobsFilter.maxFieldLength)\"></label>"
        }
        html += "<label>finished within<select name=\"since\"><option value=\"\">any time</option>"
        for s in JobsFilter.Since.allCases { html += "<option\(filter.since == s ? " selected" : "")>\(s.rawValue)</option>" }
        html += "</select></label>"
        html += "<label>from (UTC)<input type=\"datetime-local\" step=\"1\" name=\"from\" value=\"\(JobsFilter.local(filter.from))\"></label>"
        html += "<label>to (UTC)<input type=\"datetime-local\" step=\"1\" name=\"to\" value=\"\(JobsFilter.local(filter.to))\"></label>"
        html += "<button type=\"submit\">Filter</button> <a href=\"/jobs\">clear</a></form>"

        let over = matching > cap
        let n = over ? HTML.grouped(cap) + "+" : HTML.grouped(matching)
        html += "<div class=\"actions\"><span><strong>\(n)</strong> jobs match</span>"
        // Bulk actions for what the filter can hold: retry for failed and cancelled jobs,
        // cancel for queued and running ones.
        let hidden = filter.fields.filter { !$0.1.isEmpty }
        if matching > 0 && [nil, .failed, .cancelled].contains(filter.state) {
            html += HTML.button(
                action: "/jobs/retry", label: "Retry the failed and cancelled ones", csrf: csrf, fields: hidden,
                confirm: "Retry every failed or cancelled job this filter matches?")
        }
        if matching > 0 && [nil, .queued, .running].contains(filter.state) {
            html += HTML.button(
                action: "/jobs/cancel", label: "Cancel the queued and running ones", csrf: csrf, fields: hidden, danger: true,
                confirm: "Cancel every queued or running job this filter matches?")
        }
        html += "</div>"

        html +=
            "<table><thead><tr><th></th><th>job</th><th>state</th><th>queue</th><th>source</th><th>chain</th>"
            + "<th class=\"num\">attempts</th><th>created</th><th>finished</th><th>error</th></tr></thead><tbody>"
        for j in page.jobs {
            var thumb = ""
            if j.state == .succeeded, let d = j.resultDigest {
                thumb =
                    "<a href=\"/jobs/\(j.id)\"><img class=\"thumb\" loading=\"lazy\" src=\"/results/\(HTML.escape(d))\" alt=\"result of job \(j.id)\"></a>"
            }
            html +=
                "<tr><td>\(thumb)</td><td><a href=\"/jobs/\(j.id)\">\(j.id)</a></td><td>\(HTML.badge(j.state.rawValue))</td>"
                + "<td>\(HTML.escape(j.queue))</td><td>\(HTML.clipped(j.source, 60))</td><td>\(HTML.clipped(j.processors, 48))</td>"
                + "<td class=\"num\">\(j.attempt)/\(j.maxAttempts)</td><td>\(HTML.time(j.createdAt))</td><td>\(HTML.time(j.finishedAt))</td>"
                + "<td>\(j.code.map { "<code>\(HTML.escape($0))</code>" } ?? "")</td></tr>"
        }
        if page.jobs.isEmpty { html += "<tr><td colspan=\"10\" class=\"muted\">no job matches</td></tr>" }
        html += "</tbody></table><div class=\"pager\">"
        if before != nil { html += "<a href=\"/jobs\(HTML.escape(HTML.query(filter.fields)))\">« newest</a>" }
        if let next = page.nextBefore {
            html += "<a href=\"/jobs\(HTML.escape(HTML.query(filter.fields + [("before", String(next))])))\">older »</a>"
        }
        html += "</div>"
        return html
    }
}
