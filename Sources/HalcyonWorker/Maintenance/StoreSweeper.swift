import HalcyonQueue
import HalcyonRuntime
import HalcyonStore
import HalcyonStoreMaintenance
import Logging
import ServiceLifecycle

/// Sweeps the store every `sweepInterval` (expired files, dangling keys, the size limit) when
/// no other worker is sweeping, then applies row retention (`RowRetention`) when configured; the first sweep comes 5–30 s after start, so a fleet started
/// together doesn't all try at once, and a store that cannot take writes is swept at once when it
/// has a size limit (`StoreHealth.sweepDue`). A sweep in progress stops at its next file on shutdown.
struct StoreSweeper: Service, CustomStringConvertible {
    /// Its name only: ServiceLifecycle logs each service's description, and a reflected one
    /// would print the whole configuration (secrets included) and cost start-up time.
    var description: String { "StoreSweeper" }

    let configuration: WorkerConfiguration
    let store: any ResultStore
    let health: StoreHealth
    let conninfo: String
    let metrics: Metrics
    let logger: Logger

    func run() async {
        await runPeriodically(every: configuration.sweepInterval, wake: health.sweepDue) { cancel in await sweep(cancel: cancel) }
    }

    /// Sweeps if no other worker is sweeping (the sweep lease), on a connection of its own, so
    /// that the lease's renewals and the retention's batches never wait behind heartbeats.
    private func sweep(cancel: CancellationFlag) async {
        do {
            let connection = try await PGConnection.connect(conninfo, label: "sweep", statementTimeout: configuration.statementTimeout.seconds)
            defer { Task { await connection.close() } }
            let maintenance = StoreMaintenance(store: store, sizeLimit: configuration.storeSizeLimit, sweptBy: configuration.workerID)
            let queue = JobQueue(connection: connection)
            if let retention = RowRetention(configuration), !cancel.isCancelled {
                do {
                    if try await retention.run(queue, logger: logger) == nil { logger.debug("row retention skipped: another worker is pruning") }
                } catch {
                    logger.warning("row retention failed", metadata: ["error": "\(error)"])
                }
            }
            guard let report = try await maintenance.sweep(queue, waitForLock: false, cancel: cancel) else {
                logger.debug("store sweep skipped: another worker is sweeping")
                return
            }
            metrics.swept(report)
            await health.swept(freedBytes: report.freedBytes)
            let meta = StoreMaintenance.metadata(report)
            if report.failure != nil {
                logger.warning("store sweep incomplete", metadata: meta)
            } else if report.removedFiles + report.removedKeys + report.removedTempFiles > 0 {
                logger.info("store swept", metadata: meta)
            } else {
                logger.debug("store swept", metadata: meta)
            }
        } catch {
            logger.warning("store sweep failed", metadata: ["error": "\(error)"])
        }
    }
}
