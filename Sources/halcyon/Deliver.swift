import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonFetch
import HalcyonQueue
import HalcyonRuntime
import HalcyonWorker
import Logging
import ServiceLifecycle
import Synchronization

/// `halcyon deliver`: webhook deliveries alone, no job claimed.
struct Deliver: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Deliver the webhooks that are due (any job's), claiming no job.",
        discussion: """
            Every worker delivers webhooks already; this command is for a delivery that is still \
            pending with no worker running (a batch drained by a worker that had to stop, a \
            receiver that was down until now), or to deliver from another host than the workers'. \
            It takes due deliveries from the rows as workers do, with the same retries, per-host \
            limits and circuit breaker, and records each outcome on its row.

            --drain exits once no delivery is due now or due for a retry within --grace (exit 0); \
            without it, it runs until SIGTERM/SIGINT, which end the deliveries in flight at once \
            (they are due again at once, for any worker or deliverer).

            Environment: HALCYON_WEBHOOK_SECRET (space-separated --webhook-secret), \
            HALCYON_ALLOW_NETWORKS (comma-separated --allow-network).
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions
    @OptionGroup var webhooks: WebhookOptions
    @OptionGroup var network: AllowNetworkOptions

    @Flag(help: "Exit when no delivery is due now or due for a retry within --grace.")
    var drain = false
    @Option(help: "With --drain: how far ahead a retry still waits to be delivered, 0s–1d.")
    var grace = TimeSpanArgument(.seconds(20))
    @Option(help: "How often to look for due deliveries, 10ms–1h.")
    var pollInterval = TimeSpanArgument(.seconds(1))
    @Option(help: "Deadline of every database statement, 1s–1h.")
    var statementTimeout = TimeSpanArgument(.seconds(30))

    func validate() throws {
        try grace.check("--grace", 0...86_400)
        try pollInterval.check("--poll-interval", 0.01...3600)
        try statementTimeout.check("--statement-timeout", 1...3600)
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let (connection, conninfo) = try await database.connect()
        await connection.close()
        var fetch = FetchConfiguration()
        fetch.addressPolicy = network.policy
        let settings = WebhookDeliverer.Settings(
            webhooks: webhooks.configuration(), fetch: fetch, drain: drain, grace: grace.duration, pollInterval: pollInterval.duration,
            statementTimeout: statementTimeout.duration)

        let stopRequested = Atomic<Bool>(false)
        let deliverer = WebhookDeliverer(
            deliveringOnly: settings, conninfo: conninfo, stopRequested: { stopRequested.load(ordering: .relaxed) }, logger: logger)
        let group = ServiceGroup(
            configuration: .init(services: [.init(service: deliverer, successTerminationBehavior: .gracefullyShutdownGroup)], logger: logger))
        let signals = SignalForwarder(signals: [SIGTERM, SIGINT]) {
            logger.info("stop requested: ending the deliveries in flight (they are due again at once)")
            stopRequested.store(true, ordering: .relaxed)
            Task { await group.triggerGracefulShutdown() }
        }
        defer { signals.cancel() }
        logger.info(drain ? "delivering webhooks until none is due" : "delivering webhooks")
        try await group.run()
    }
}
