import Foundation
import HalcyonQueue
import HalcyonRuntime
import HalcyonStore
import Logging

/// One sweep of the store, as workers run it periodically and `halcyon sweep` on demand: under
/// the sweep lease (one sweeper at a time across the fleet), recorded in
/// `halcyon.store_sweeps` so `halcyon status` can show the store's size against its limit.
public struct StoreMaintenance: Sendable {
    public let store: any ResultStore
    /// Bytes the store may hold; nil for no limit.
    public let sizeLimit: Int64?
    /// Who sweeps: a worker id, or `halcyon sweep`.
    public let sweptBy: String

    public init(store: any ResultStore, sizeLimit: Int64?, sweptBy: String) {
        self.store = store
        self.sizeLimit = sizeLimit
        self.sweptBy = sweptBy
    }

    /// Sweeps and records it, holding the sweep lease (`LeaseName.storeSweep`). `waitForLock`:
    /// wait for a sweep running elsewhere to finish (`onWait` is told first, and the lease is
    /// tried again every second); otherwise return nil at once if one is running. A sweep that
    /// loses its lease (its renewals failed) stops at its next file, as on `cancel`.
    public func sweep(
        _ queue: JobQueue, waitForLock: Bool, cancel: CancellationFlag? = nil,
        onWait: @Sendable () -> Void = {}
    ) async throws -> SweepReport? {
        let holder = JobQueue.leaseHolder(sweptBy)
        let stop = CancellationFlag()
        cancel?.onCancel { stop.cancel() }
        let store = self.store, sizeLimit = self.sizeLimit
        var waiting = false
        while true {
            let report = try await queue.withLease(.storeSweep, holder: holder, lost: stop) {
                await store.sweep(sizeLimit: sizeLimit, now: Date(), cancel: stop)
            }
            if let report {
                try? await queue.recordSweep(
                    .init(
                        sweptBy: sweptBy, storeRoot: store.location, keptFiles: Int64(report.keptFiles),
                        keptBytes: report.keptBytes, sizeLimit: report.sizeLimit, removedFiles: Int64(report.removedFiles),
                        removedKeys: Int64(report.removedKeys), freedBytes: report.freedBytes, took: .seconds(report.seconds)))
                return report
            }
            guard waitForLock, !stop.isCancelled else { return nil }
            if !waiting {
                onWait()
                waiting = true
            }
            _ = await stop.sleep(seconds: 1)
        }
    }

    /// A sweep's report as log fields.
    public static func metadata(_ r: SweepReport) -> Logger.Metadata {
        guard case .object(let fields) = r.json else { return [:] }
        return fields.mapValues { .string($0.jsonText) }
    }
}
