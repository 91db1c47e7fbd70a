import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonDashboard
import HalcyonDomain
import HalcyonRuntime
import HalcyonStore
import Logging
import ServiceLifecycle

struct Dashboard: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dashboard",
        abstract: "Serve the operators' web dashboard: the queue, the failures and the images themselves.",
        discussion: """
            Pages: / (overview), /jobs (filterable list, bulk retry/cancel), /jobs/ID (one job), \
            /results/SHA256 (a stored result by its digest); the same data as JSON under /api/.

            Security: bound to 127.0.0.1 by default, where requests must name 127.0.0.1 or \
            localhost as their Host. Any other --address needs --auth-token (or \
            HALCYON_DASHBOARD_TOKEN, at least 16 characters): then every request carries it as \
            'Authorization: Bearer TOKEN' or signs in at /login for a session cookie. \
            --viewer-token (or HALCYON_DASHBOARD_VIEWER_TOKEN) adds a second token that sees every \
            page and the API but may not retry or cancel (403). Retry and cancel are POSTs with a \
            per-process form token. Serve it over TLS through a reverse proxy when it leaves the \
            machine.

            Run it as the store's owner (or root): results are then read without moving their \
            access time, which the store's expiry is computed from.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var logging: LoggingOptions

    @Option(help: "IPv4 address to listen on; other than loopback requires --auth-token.")
    var address = DashboardConfiguration.defaultAddress
    @Option(help: ArgumentHelp(Settings.port.help))
    var port = Settings.port.defaultValue
    @Option(
        help:
            "The operator's shared secret (sees and acts), at least 16 characters (default: HALCYON_DASHBOARD_TOKEN, better: an argument is visible to others in ps)."
    )
    var authToken: String?
    @Option(
        help:
            "A read-only token of at least 16 characters, besides --auth-token: every page and the API, no retry or cancel (default: HALCYON_DASHBOARD_VIEWER_TOKEN)."
    )
    var viewerToken: String?
    @Option(help: ArgumentHelp(Settings.liveInterval.help))
    var refresh = TimeSpanArgument(Settings.liveInterval.defaultValue)
    @Option(help: ArgumentHelp(Settings.pageSize.help))
    var pageSize = Settings.pageSize.defaultValue
    @Option(help: ArgumentHelp(Settings.statementTimeout.help))
    var statementTimeout = TimeSpanArgument(Settings.statementTimeout.defaultValue)
    @Option(help: ArgumentHelp(Settings.maxResultStreams.help))
    var maxResultStreams = Settings.maxResultStreams.defaultValue
    @Option(
        help: ArgumentHelp(
            "Your tracing UI's page of a trace, with {trace_id} where the trace id goes: a job enqueued with a traceparent links there (default: HALCYON_DASHBOARD_TRACE_URL; none: the trace id is shown as text)."
        ))
    var traceURL: String?

    private typealias Settings = DashboardConfiguration.Settings

    func validate() throws {
        let configuration = try makeConfiguration()
        do {
            try configuration.validate()
        } catch {
            throw ValidationError(error.message)
        }
    }

    func makeConfiguration() throws -> DashboardConfiguration {
        var c = DashboardConfiguration()
        c.address = address
        c.port = port
        let environment = ProcessInfo.processInfo.environment
        func variable(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        c.authToken = authToken ?? variable("HALCYON_DASHBOARD_TOKEN")
        c.viewerToken = viewerToken ?? variable("HALCYON_DASHBOARD_VIEWER_TOKEN")
        c.store = try storeOptions.location()
        c.liveInterval = refresh.duration
        c.pageSize = pageSize
        c.statementTimeout = statementTimeout.duration
        c.maxResultStreams = maxResultStreams
        c.traceURL = traceURL ?? variable("HALCYON_DASHBOARD_TRACE_URL")
        return c
    }

    func run() async throws {
        let logger = logging.makeLogger("halcyon.dashboard")
        let (_, conninfo) = try await database.connect()
        let server = try await DashboardServer(configuration: try makeConfiguration(), conninfo: conninfo, logger: logger)
        let group = ServiceGroup(configuration: .init(services: [server], logger: logger))
        // Not ServiceGroup's own signal handling (a DispatchSource that can lose an early
        // SIGTERM on Linux, see SignalForwarder): a signal starts the group's graceful shutdown,
        // which lets the requests being answered finish.
        let signals = SignalForwarder(signals: [SIGTERM, SIGINT]) { Task { await group.triggerGracefulShutdown() } }
        defer { signals.cancel() }
        let announce = Task {
            guard (try? await server.listening()) != nil else { return }
            let tokens =
                server.configuration.authToken == nil
                ? "" : server.configuration.viewerToken == nil ? "  (token required)" : "  (token required; viewer token: read-only)"
            print("dashboard: \(server.url)\(tokens)")
            fflush(nil)
            logger.info("dashboard listening", metadata: ["url": "\(server.url)", "store": "\((try? storeOptions.location())?.description ?? "?")"])
        }
        defer { announce.cancel() }
        try await group.run()
        logger.info("dashboard stopped")
    }
}
