import Foundation
import HalcyonQueue
import HalcyonRuntime

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

/// `/jobs` (template `jobs`): the filter form, bulk retry and cancel for the filter (for the
/// operator), and a page of jobs with a thumbnail of each stored result.
struct JobsPage {
    struct Option {
        let name: String
        let selected: Bool
    }
    struct TextField {
        let name: String
        let value: String
        let hint: String
        let maxLength: Int
    }
    struct JobRow {
        let id: String
        let thumb: String?
        let state: String
        let queue: String
        let source: Clipped
        let chain: Clipped
        let attempt: String
        let maxAttempts: String
        let created: String
        let finished: String
        let errorCode: String?
    }

    let notice: String?
    let states: [Option]
    let textFields: [TextField]
    let sinces: [Option]
    let from: String
    let to: String
    let matching: String
    let bulkRetry: Button?
    let bulkCancel: Button?
    let jobs: [JobRow]
    /// The first page's query, when this is not it; the next page's.
    let newest: String?
    let older: String?

    /// `csrf` is nil for a viewer: no action is offered.
    init(filter: JobsFilter, page: JobQueue.JobPage, matching: Int, cap: Int, before: Int64?, csrf: String?, notice: String?) {
        self.notice = notice
        states = JobState.allCases.map { Option(name: $0.rawValue, selected: filter.state == $0) }
        textFields = [
            ("queue", filter.queue, "default"), ("code", filter.code, "fetch.http_status"), ("tag", filter.tag, ""),
            ("source", filter.source, "part of the URL"),
        ].map { TextField(name: $0.0, value: $0.1 ?? "", hint: $0.2, maxLength: JobsFilter.maxFieldLength) }
        sinces = JobsFilter.Since.allCases.map { Option(name: $0.rawValue, selected: filter.since == $0) }
        from = JobsFilter.local(filter.from)
        to = JobsFilter.local(filter.to)
        self.matching = matching > cap ? Format.grouped(cap) + "+" : Format.grouped(matching)
        // Bulk actions for what the filter can hold: retry for failed and cancelled jobs,
        // cancel for queued and running ones.
        let hidden = filter.fields.filter { !$0.1.isEmpty }.map { Button.Field(name: $0.0, value: $0.1) }
        bulkRetry = csrf.flatMap { csrf in
            matching > 0 && [nil, .failed, .cancelled].contains(filter.state)
                ? Button(
                    action: "/jobs/retry", label: "Retry the failed and cancelled ones", csrf: csrf, fields: hidden,
                    confirm: "Retry every failed or cancelled job this filter matches?") : nil
        }
        bulkCancel = csrf.flatMap { csrf in
            matching > 0 && [nil, .queued, .running].contains(filter.state)
                ? Button(
                    action: "/jobs/cancel", label: "Cancel the queued and running ones", csrf: csrf, fields: hidden, danger: true,
                    confirm: "Cancel every queued or running job this filter matches?") : nil
        }
        jobs = page.jobs.map { j in
            JobRow(
                id: String(j.id), thumb: j.state == .succeeded ? j.resultDigest : nil, state: j.state.rawValue, queue: j.queue,
                source: Clipped(j.source, 60), chain: Clipped(j.processors, 48), attempt: String(j.attempt), maxAttempts: String(j.maxAttempts),
                created: Format.time(j.createdAt), finished: Format.time(j.finishedAt), errorCode: j.code)
        }
        newest = before != nil ? Format.query(filter.fields) : nil
        older = page.nextBefore.map { Format.query(filter.fields + [("before", String($0))]) }
    }

    func render() -> String { Views.render("jobs", self) }
}
