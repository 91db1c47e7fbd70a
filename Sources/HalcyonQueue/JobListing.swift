import Foundation

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
        let rows = try await connection.rows(SQL.ListJobs(filter: filter, before: before, limit: limit + 1))
        let jobs = rows.prefix(limit).map(\.job)
        return JobPage(jobs: Array(jobs), nextBefore: rows.count > limit ? jobs.last?.id : nil)
    }

    /// How many jobs match `filter`, counting at most `cap + 1` (more than `cap` means "over").
    public func count(_ filter: JobFilter, cap: Int) async throws -> Int {
        try await connection.row(SQL.CountFilteredCapped(filter: filter, cap: cap + 1))?.n ?? 0
    }
}
