extension JobQueue {
    /// A job a worker holds, as its supervisor finds it after the worker's image process died.
    public struct HeldJob: Sendable, Equatable {
        public var claim: Claim
        /// Earlier deaths of an image process while this job was in processing.
        public var crashes: Int
    }

    /// The jobs `workerID` holds (running, locked by it).
    public func heldJobs(workerID: String) async throws -> [HeldJob] {
        try await connection.rows(SQL.HeldJobs(workerID: workerID)).map { row in
            HeldJob(claim: Claim(id: row.job.id, attempt: row.job.attempt ?? 0, stamp: row.claimedAt), crashes: row.crashes)
        }
    }

    /// Counts a restart of `workerID`'s image process, with what ended the last one.
    public func recordRestart(workerID: String, reason: String) async throws {
        try await connection.run(SQL.RecordRestart(workerID: workerID, reason: reason))
    }
}
