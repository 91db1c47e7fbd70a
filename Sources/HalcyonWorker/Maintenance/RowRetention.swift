import HalcyonQueue
import HalcyonRuntime
import Logging

/// Row retention (`--retain-succeeded`, `--retain-failed`): deletes finished rows older than
/// their retention, a batch at a time (no long locks), under a lease (`LeaseName.rowRetention`) so one worker at a
/// time does it, and records the run in `halcyon.row_prunes` for `halcyon status`. Runs with
/// the store sweep. Rows whose webhook is still to be delivered stay.
struct RowRetention: Sendable {
    let succeeded: Duration?
    let failed: Duration?
    let prunedBy: String

    init?(_ configuration: WorkerConfiguration) {
        guard configuration.retainSucceeded != nil || configuration.retainFailed != nil else { return nil }
        succeeded = configuration.retainSucceeded
        failed = configuration.retainFailed
        prunedBy = configuration.workerID
    }

    /// Prunes if no other worker is; nil when another one was.
    func run(_ queue: JobQueue, logger: Logger) async throws -> [JobState: Int]? {
        let started = ContinuousClock.now
        let lost = CancellationFlag()
        let (succeeded, failed) = (self.succeeded, self.failed)
        let result = try await queue.withLease(.rowRetention, holder: JobQueue.leaseHolder(prunedBy), lost: lost) {
            var pruned: [JobState: Int] = [:]
            if let succeeded, !lost.isCancelled {
                pruned.merge(try await queue.prune(olderThan: succeeded, states: [.succeeded]), uniquingKeysWith: +)
            }
            if let failed, !lost.isCancelled {
                pruned.merge(try await queue.prune(olderThan: failed, states: [.failed, .cancelled]), uniquingKeysWith: +)
            }
            return pruned
        }
        guard let pruned = result else { return nil }
        let took = ContinuousClock.now - started
        try await queue.recordPrune(by: prunedBy, pruned, took: took)
        let meta: Logger.Metadata = [
            "succeeded": "\(pruned[.succeeded] ?? 0)", "failed": "\(pruned[.failed] ?? 0)", "cancelled": "\(pruned[.cancelled] ?? 0)",
            "took": "\(TimeSpan.format(took))",
        ]
        if pruned.values.reduce(0, +) > 0 {
            logger.info("finished rows pruned", metadata: meta)
        } else {
            logger.debug("finished rows pruned", metadata: meta)
        }
        return pruned
    }
}
