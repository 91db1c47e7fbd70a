import HalcyonQueue
import HalcyonRuntime
import Logging
import ServiceLifecycle

/// The usage roll-up: every `usageInterval` (a minute), when no other worker is doing it (the
/// lease `LeaseName.usageRollUp`), moves the usage events the finished attempts appended into
/// their hours of `halcyon.usage` (a bounded statement at a time, at most `maxBatches` per run),
/// then deletes hours older than `--retain-usage`. Always on: the events table would otherwise
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
            let meta: Logger.Metadata = [
                "events": "\(report.events)", "hours": "\(report.hours)", "pruned_hours": "\(report.pruned)",
                "took": "\(TimeSpan.format(report.seconds))",
            ]
            if report.events + report.pruned > 0 {
                logger.info("usage rolled up", metadata: meta)
            } else {
                logger.debug("usage rolled up", metadata: meta)
            }
        } catch {
            logger.warning("usage roll-up failed", metadata: ["error": "\(error)"])
        }
    }

    /// What a run did.
    struct Report: Sendable {
        var events = 0, hours = 0, pruned = 0
        var seconds = 0.0
    }

    /// Rolls up and prunes under the lease; nil when another worker holds it.
    static func run(_ queue: JobQueue, holder: String, retain: Duration, cancel: CancellationFlag) async throws -> Report? {
        let started = ContinuousClock.now
        let lost = CancellationFlag()
        var report = try await queue.withLease(.usageRollUp, holder: JobQueue.leaseHolder(holder), lost: lost) {
            var report = Report()
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
