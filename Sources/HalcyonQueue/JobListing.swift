import Foundation
import HalcyonCore

/// Pages of jobs for the dashboard's list: newest first, keyset-paginated by id (a page costs
/// the same at the millionth row as at the first).
extension JobQueue {
    /// One row of the list.
    public struct ListedJob: Sendable {
        public var id: Int64
        public var state: JobState
        public var queue: String
        public var source: String
        public var processors: String
        public var attempt: Int
        public var maxAttempts: Int
        public var createdAt: String
        public var finishedAt: String?
        /// The last error's code and message (a failed, or retrying, job).
        public var code: String?
        public var lastError: String?
        public var resultDigest: String?
        public var resultFormat: String?
        public var resultWidth: Int?
        public var resultHeight: Int?
        public var resultBytes: Int64?
        public var cacheHit: Bool?
        public var tags: [String]
    }

    /// A page of jobs matching `filter`, and the id to pass as `before` for the next (nil: last page).
    public struct JobPage: Sendable {
        public var jobs: [ListedJob]
        public var nextBefore: Int64?
    }

    /// Up to `limit` jobs matching `filter` with ids below `before` (nil: from the newest).
    public func list(_ filter: JobFilter, before: Int64?, limit: Int) async throws -> JobPage {
        let rows = try await connection.execute(filter.bind(SQL.listJobs), filter.parameters + [before.map { String($0) }, String(limit + 1)])
            .dictionaries
        var jobs: [ListedJob] = []
        for row in rows.prefix(limit) {
            func text(_ c: String) -> String? { row[c] ?? nil }
            func int(_ c: String) -> Int? { text(c).flatMap { Int($0) } }
            guard let id = text("id").flatMap({ Int64($0) }), let state = text("state").flatMap(JobState.init(rawValue:)) else { continue }
            jobs.append(
                ListedJob(
                    id: id, state: state, queue: text("queue") ?? "", source: text("source") ?? "", processors: text("processors") ?? "",
                    attempt: int("attempt") ?? 0, maxAttempts: int("max_attempts") ?? 0, createdAt: text("created_at") ?? "",
                    finishedAt: text("finished_at"), code: text("code"), lastError: text("last_error"), resultDigest: text("result_digest"),
                    resultFormat: text("result_format"), resultWidth: int("result_width"), resultHeight: int("result_height"),
                    resultBytes: text("result_bytes").flatMap { Int64($0) }, cacheHit: text("cache_hit").map { $0 == "t" },
                    tags: text("tags").map(PGRows.parseTextArray) ?? []))
        }
        return JobPage(jobs: jobs, nextBefore: rows.count > limit ? jobs.last?.id : nil)
    }

    /// How many jobs match `filter`, counting at most `cap + 1` (more than `cap` means "over").
    public func count(_ filter: JobFilter, cap: Int) async throws -> Int {
        try await connection.execute(filter.bind(SQL.countFilteredCapped), filter.parameters + [String(cap + 1)]).value(0, "n").flatMap { Int($0) }
            ?? 0
    }
}
