import HalcyonQueue
import Logging
import ServiceLifecycle

/// Reads the queues with fleet-wide limits (`halcyon.queues`: `max_running`, `max_per_second`,
/// `max_running_per_key`) and their running jobs into the metrics every
/// `queueMetricsInterval`, so a dashboard can plot each limit beside what runs under it. One
/// statement per read, on the maintenance connection; every worker reports the same
/// fleet-wide values (aggregate them with `max by (queue)`).
struct QueueMetricsService: Service, CustomStringConvertible {
    var description: String { "QueueMetrics" }

    let interval: Duration
    let queue: JobQueue
    let metrics: Metrics
    let logger: Logger

    /// The most queues reported: each is a few series in every worker's metrics.
    static let maxQueues = 1000

    func run() async {
        await runPeriodically(every: interval, first: .zero) { _ in await read() }
    }

    private func read() async {
        do {
            metrics.queues(try await queue.limitedQueues(most: Self.maxQueues))
        } catch {
            logger.debug("queue limits not read for the metrics", metadata: ["error": "\(error)"])
        }
    }
}
