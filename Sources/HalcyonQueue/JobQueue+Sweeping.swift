import Foundation
import HalcyonRuntime

/// The store sweep's record, shared by `halcyon sweep` and the workers' sweeps (one at a time:
/// `LeaseName.storeSweep`).
extension JobQueue {
    /// What a sweep left and removed, for `halcyon status` (the store's size against its limit).
    public struct SweepRecord: Sendable {
        public var sweptBy: String, storeRoot: String
        public var keptFiles: Int64, keptBytes: Int64, sizeLimit: Int64?
        public var removedFiles: Int64, removedKeys: Int64, freedBytes: Int64
        /// How long the sweep took.
        public var took: Duration

        public init(
            sweptBy: String, storeRoot: String, keptFiles: Int64, keptBytes: Int64, sizeLimit: Int64?,
            removedFiles: Int64, removedKeys: Int64, freedBytes: Int64, took: Duration
        ) {
            self.sweptBy = sweptBy
            self.storeRoot = storeRoot
            self.keptFiles = keptFiles
            self.keptBytes = keptBytes
            self.sizeLimit = sizeLimit
            self.removedFiles = removedFiles
            self.removedKeys = removedKeys
            self.freedBytes = freedBytes
            self.took = took
        }
    }

    public func recordSweep(_ r: SweepRecord) async throws {
        try await connection.run(SQL.RecordSweep(record: r))
    }
}
