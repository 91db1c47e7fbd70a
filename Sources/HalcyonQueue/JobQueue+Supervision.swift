import HalcyonCore

extension JobQueue {
    /// A job a worker holds, as its supervisor finds it after the worker's image process died.
    public struct HeldJob: Sendable, Equatable {
        public var claim: Claim
        /// Earlier deaths of an image process while this job was in processing.
        public var crashes: Int
    }

    /// The jobs `workerID` holds (running, locked by it).
    public func heldJobs(workerID: String) async throws -> [HeldJob] {
        try await connection.execute(SQL.heldJobs, [workerID]).rows.compactMap { row in
            guard let id = row[0].flatMap({ Int64($0) }), let attempt = row[1].flatMap({ Int($0) }) else { return nil }
            return HeldJob(claim: Claim(id: id, attempt: attempt, stamp: row[3]), crashes: row[2].flatMap { Int($0) } ?? 0)
        }
    }

    /// Counts a restart of `workerID`'s image process, with what ended the last one.
    public func recordRestart(workerID: String, reason: String) async throws {
        try await connection.execute(SQL.recordRestart, [workerID, reason])
    }
}
