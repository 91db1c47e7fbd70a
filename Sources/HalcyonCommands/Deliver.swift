import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonDomain
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
        commandName: "deliver",
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
    @Option(help: ArgumentHelp(Options.grace.help))
    var grace = TimeSpanArgument(Options.grace.defaultValue)
    @Option(help: ArgumentHelp(Options.pollInterval.help))
    var pollInterval = TimeSpanArgument(Options.pollInterval.defaultValue)
    @Option(help: ArgumentHelp(Options.statementTimeout.help))
    var statementTimeout = TimeSpanArgument(Options.statementTimeout.defaultValue)

    /// Its options: the worker's defaults and ranges (a worker delivers with its own settings),
    /// in words of their own.
    private enum Options {
        typealias Worker = WorkerConfiguration.Settings
        static let grace = Setting.duration(
            "--grace", default: Worker.grace.defaultValue, Worker.grace.range, "With --drain: how far ahead a retry still waits to be delivered")
        static let pollInterval = Setting.duration(
            "--poll-interval", default: Worker.pollInterval.defaultValue, Worker.pollInterval.range, "How often to look for due deliveries")
        static let statementTimeout = Setting.duration(
            "--statement-timeout", default: Worker.statementTimeout.defaultValue, Worker.statementTimeout.range,
            "Deadline of every database statement")
    }

    func validate() throws {
        try grace.check(Options.grace)
        try pollInterval.check(Options.pollInterval)
        try statementTimeout.check(Options.statementTimeout)
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let (connection, conninfo) = try await database.connect()
        await connection.close()
        var fetch = FetchConfiguration()
        fetch.addressPolicy = network.policy()
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
