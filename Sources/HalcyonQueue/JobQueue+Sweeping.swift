import Foundation
import HalcyonCore

/// The store sweep's lock and record, shared by `halcyon sweep` and the workers' sweeps.
extension JobQueue {

    /// Takes the sweep lock (a session advisory lock) if nobody holds it.
    public func tryLockSweep() async throws -> Bool {
        try await connection.execute(SQL.trySweepLock).value(0, "locked") == "t"
    }

    /// Waits for the sweep lock, as long as the sweep holding it takes.
    public func lockSweep() async throws {
        try await connection.execute(SQL.sweepLock, timeout: .infinity)
    }

    public func unlockSweep() async throws {
        try await connection.execute(SQL.sweepUnlock)
    }

    /// Takes the row-retention lock (a session advisory lock) if nobody holds it.
    public func tryLockRetention() async throws -> Bool {
        try await connection.execute(SQL.tryRetentionLock).value(0, "locked") == "t"
    }

    public func unlockRetention() async throws {
        try await connection.execute(SQL.retentionUnlock)
    }

    /// What a sweep left and removed, for `halcyon status` (the store's size against its limit).
    public struct SweepRecord: Sendable {
        public var sweptBy: String, storeRoot: String
        public var keptFiles: Int64, keptBytes: Int64, sizeLimit: Int64?
        public var removedFiles: Int64, removedKeys: Int64, freedBytes: Int64, seconds: Double

        public init(
            sweptBy: String, storeRoot: String, keptFiles: Int64, keptBytes: Int64, sizeLimit: Int64?,
            removedFiles: Int64, removedKeys: Int64, freedBytes: Int64, seconds: Double
        ) {
            self.sweptBy = sweptBy
            self.storeRoot = storeRoot
            self.keptFiles = keptFiles
            self.keptBytes = keptBytes
            self.sizeLimit = sizeLimit
            self.removedFiles = removedFiles
            self.removedKeys = removedKeys
            self.freedBytes = freedBytes
            self.seconds = seconds
        }
    }

    public func recordSweep(_ r: SweepRecord) async throws {
        try await connection.execute(
            SQL.recordSweep,
            [
                r.sweptBy, r.storeRoot, String(r.keptFiles), String(r.keptBytes), r.sizeLimit.map(String.init),
                String(r.removedFiles), String(r.removedKeys), String(r.freedBytes), String(r.seconds),
            ])
    }
}
