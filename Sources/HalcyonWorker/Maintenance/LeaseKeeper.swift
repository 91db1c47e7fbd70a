import HalcyonQueue
import HalcyonRuntime
import Logging
import ServiceLifecycle

/// Renews the leases of the jobs this worker holds every lease/3, abandons jobs it no longer
/// holds (cancelled by an operator, or rescued after a stall), and reports the worker's totals
/// to `halcyon.workers`. Shut down last, so leases are renewed while in-flight jobs finish.
struct LeaseKeeper: Service, CustomStringConvertible {
    /// Its name only: ServiceLifecycle logs each service's description, and a reflected one
    /// would print the whole configuration (secrets included) and cost start-up time.
    var description: String { "LeaseKeeper" }

    let configuration: WorkerConfiguration
    let queue: JobQueue
    let state: WorkerState
    let logger: Logger

    func run() async {
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            await heartbeat()
            try? await cancelWhenGracefulShutdown { [interval = configuration.heartbeatInterval] in
                try await Task.sleep(for: interval)
            }
        }
    }

    private func heartbeat() async {
        let claims = state.withHeld { $0.claims }
        do {
            let renewal = try await queue.heartbeat(claims, workerID: configuration.workerID, lease: configuration.lease)
            if !renewal.locked.isEmpty {
                logger.info("leases not renewed this time: rows locked by another session", metadata: ["jobs": "\(renewal.locked.sorted())"])
            }
            for (id, cancel) in state.withHeld({ $0.lost(from: claims, held: renewal.held) }) {
                cancel.cancel()
                logger.info("job no longer held (cancelled or rescued); abandoning", metadata: ["job": "\(id)"])
            }
            let counts = state.takeUnreported()
            try await queue.heartbeatWorker(id: configuration.workerID, done: counts.done, failed: counts.failed)
        } catch {
            logger.warning("heartbeat failed", metadata: ["error": "\(error)"])
        }
    }
}
