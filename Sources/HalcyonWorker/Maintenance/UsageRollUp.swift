import HalcyonQueue
import HalcyonRuntime
import Logging
import ServiceLifecycle

/// The usage roll-up: every `usageInterval` (a minute), when no other worker is doing it (the
/// lease `LeaseName.usageRollUp`), keeps the windows of running totals (builds one not built,
/// moves each on as hours leave it, clears one longer than `--retain-usage`), moves the usage
/// events the finished attempts appended into their hours of `halcyon.usage` and the windows'
/// totals (a bounded statement at a time, at most `maxBatches` per run), then deletes hours
/// older than `--retain-usage`. Always on: the events table would otherwise
/// grow with every job. The first run comes 5–30 s after start (a fleet started together does
/// not all try at once).
struct UsageRollUpService: Service, CustomStringConvertible {
    var description: String { "UsageRollUp" }

    let configuration: WorkerConfiguration
    let conninfo: String
    let logger: Logger

    /// Statements per run: 20 × 50,000 events a minute is far above what a fleet appends.
    static let maxBatches = 20

    func run() async {
        await runPeriodically(every: configuration.usageInterval) { cancel in await rollUp(cancel: cancel) }
    }

    /// One run, on a connection of its own (its statements never wait behind heartbeats).
    private func rollUp(cancel: CancellationFlag) async {
        do {
            let connection = try await PGConnection.connect(conninfo, label: "usage", statementTimeout: configuration.statementTimeout.seconds)
            defer { Task { await connection.close() } }
            let report = try await Self.run(
                JobQueue(connection: connection), holder: configuration.workerID, retain: configuration.retainUsage, cancel: cancel)
            guard let report else {
                logger.debug("usage roll-up skipped: another worker is rolling up")
                return
            }
            var meta: Logger.Metadata = [
                "events": "\(report.events)", "hours": "\(report.hours)", "pruned_hours": "\(report.pruned)",
                "took": "\(TimeSpan.format(report.seconds))",
            ]
            for step in report.windows.steps where step.action != .none {
                meta["window_\(step.period)"] = "\(step.action.rawValue) (totals \(step.totals), hours \(step.hours))"
            }
            if report.events + report.pruned > 0 || report.windows.changed {
                logger.info("usage rolled up", metadata: meta)
            } else {
                logger.debug("usage rolled up", metadata: meta)
            }
        } catch  where cancel.isCancelled {
            logger.info("usage roll-up stopped: the worker is stopping; the next run does it again", metadata: ["error": "\(error)"])
        } catch {
            logger.warning("usage roll-up failed", metadata: ["error": "\(error)"])
        }
    }

    /// What a run did.
    struct Report: Sendable {
        var events = 0, hours = 0, pruned = 0
        var windows = JobQueue.UsageWindowUpkeep()
        var seconds = 0.0
    }

    /// Rolls up and prunes under the lease; nil when another worker holds it. Raising `cancel`
    /// (a stop) cancels the statement under way — a window's build may take a while, a statement
    /// may wait on a lock — and every later one on `queue`'s connection, which is the run's own:
    /// its transaction rolls back, and the next run does the work again.
    static func run(_ queue: JobQueue, holder: String, retain: Duration, cancel: CancellationFlag) async throws -> Report? {
        cancel.onCancel { queue.connection.abandon() }
        let started = ContinuousClock.now
        let lost = CancellationFlag()
        var report = try await queue.withLease(.usageRollUp, holder: JobQueue.leaseHolder(holder), lost: lost) {
            var report = Report()
            // The windows first: an hour that left one is subtracted before the prune could
            // delete it (the prune never deletes an hour a built window counts).
            report.windows = try await queue.keepUsageWindows(retain: retain)
            for _ in 0..<maxBatches where !lost.isCancelled && !cancel.isCancelled {
                let batch = try await queue.rollUpUsage()
                report.events += batch.events
                report.hours += batch.hours
                if batch.events < JobQueue.usageRollUpBatch { break }
            }
            if !lost.isCancelled, !cancel.isCancelled {
                report.pruned = try await queue.pruneUsage(olderThan: retain)
            }
            return report
        }
        report?.seconds = (ContinuousClock.now - started).seconds
        return report
    }
}
