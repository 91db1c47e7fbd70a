import HalcyonQueue
import Prometheus
import Testing

@testable import HalcyonWorker

/// The worker's metrics into a Prometheus registry, without a worker: the fleet's queue limits.
struct MetricsTests {
    func families(_ registry: PrometheusCollectorRegistry) -> [String] {
        MetricsExporter.text(registry).split(separator: "\n").filter { $0.hasPrefix("halcyon_queue_") }.map(String.init).sorted()
    }

    @Test func queueLimitsFollowWhatIsReadAndVanishWhenLifted() {
        let registry = PrometheusCollectorRegistry()
        let metrics = Metrics(processingSlots: 1, fetchSlots: 1, factory: Metrics.prometheusFactory(registry: registry))
        metrics.queues([
            LimitedQueue(queue: "origin", limits: QueueLimits(maxRunning: 2, maxRunningPerKey: 1), running: 2),
            LimitedQueue(queue: "slow", limits: QueueLimits(maxPerSecond: 0.5), running: 7),
        ])
        #expect(
            families(registry) == [
                #"halcyon_queue_max_per_second{queue="slow"} 0.5"#, #"halcyon_queue_max_running_per_key{queue="origin"} 1.0"#,
                #"halcyon_queue_max_running{queue="origin"} 2.0"#, #"halcyon_queue_running{queue="origin"} 2.0"#,
                #"halcyon_queue_running{queue="slow"} 7.0"#,
            ])
        // The per-key cap lifted, "slow"'s limits all lifted: their series go.
        metrics.queues([LimitedQueue(queue: "origin", limits: QueueLimits(maxRunning: 3), running: 1)])
        #expect(families(registry) == [#"halcyon_queue_max_running{queue="origin"} 3.0"#, #"halcyon_queue_running{queue="origin"} 1.0"#])
        metrics.queues([])
        #expect(families(registry).isEmpty)
    }
}
