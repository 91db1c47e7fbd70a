import Foundation
import HalcyonHTTP
import Hummingbird
import Logging
import Prometheus
import ServiceLifecycle

/// Publishes a Prometheus registry: an HTTP endpoint (`/metrics`, plus `/healthz` for container
/// health checks) and/or a file rewritten atomically every 15 s for node_exporter's textfile
/// collector. Either, both or neither. A `Service`: the endpoint is a Hummingbird application
/// (with `HTTPServerSettings`' limits) run inside it, and on graceful shutdown it stops the
/// endpoint and writes the file a last time.
public struct MetricsExporter: Service, CustomStringConvertible {
    /// Its name only: ServiceLifecycle logs each service's description, and a reflected one
    /// would print the whole configuration (secrets included) and cost start-up time.
    public var description: String { "MetricsExporter" }

    private let server: HTTPServerService<RouterResponder<BasicRequestContext>>?
    private let address: String
    private let file: String?
    private let registry: PrometheusCollectorRegistry
    private let logger: Logger
    /// The ports and the default address of the endpoint (`--metrics-port`, `--metrics-address`):
    /// any HTTP server's.
    public static let ports = HTTPServerSettings.ports
    public static let defaultAddress = HTTPServerSettings.defaultAddress
    /// Between two writes of the file.
    public static let fileInterval: Duration = .seconds(15)

    /// An endpoint on `address`:`port` when `port` is given (0: any free port), a file when
    /// `file` is. Throws for an address or port that cannot work; the port is bound when the
    /// service runs (`listening()` waits for it). `/healthz` answers 200 `ok`, or 503 with what
    /// `unhealthy` says while it says something (`Worker.unhealthy`).
    public init(
        registry: PrometheusCollectorRegistry, port: Int?, address: String = defaultAddress, file: String?, logger: Logger,
        unhealthy: @escaping @Sendable () -> String? = { nil }
    ) throws {
        self.registry = registry
        self.address = address
        self.file = file
        self.logger = logger
        if let port {
            let router = Router(options: .autoGenerateHeadEndpoints)
            router.add(middleware: NotFoundText(text: "not found: try /metrics or /healthz\n"))
            router.get("/metrics") { _, _ in
                Response.body(.ok, contentType: "text/plain; version=0.0.4; charset=utf-8", Array(Self.text(registry).utf8))
            }
            router.get("/healthz") { _, _ in
                guard let reason = unhealthy() else { return Response.text(.ok, "ok\n") }
                return Response.text(.serviceUnavailable, "unhealthy: \(reason)\n")
            }
            server = try HTTPServerService(
                responder: router.buildResponder(), settings: HTTPServerSettings(address: address, port: port, portOption: "--metrics-port"),
                logger: logger)
        } else {
            server = nil
        }
    }

    /// The endpoint's port once it listens (nil without an endpoint); throws when it cannot listen.
    public func listening() async throws -> Int? {
        guard let server else { return nil }
        return try await server.listening.wait()
    }

    public func run() async throws {
        try await withThrowingDiscardingTaskGroup { group in
            if let server {
                group.addTask { try await server.run() }
                group.addTask { [address, logger] in
                    guard let port = try? await server.listening.wait() else { return }
                    logger.info("metrics endpoint listening", metadata: ["url": "http://\(address):\(port)/metrics"])
                }
            }
            if let file {
                while !Task.isShuttingDownGracefully, !Task.isCancelled {
                    Self.write(Self.text(registry), to: file, logger: logger)
                    try? await cancelWhenGracefulShutdown { try await Task.sleep(for: Self.fileInterval) }
                }
            } else {
                try? await gracefulShutdown()
            }
        }
        finish()
    }

    /// Writes the file a last time.
    public func finish() {
        if let file { Self.write(Self.text(registry), to: file, logger: nil) }
    }

    /// The registry in Prometheus' text exposition format (0.0.4).
    public static func text(_ registry: PrometheusCollectorRegistry) -> String {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    /// Writes beside the target and renames, so a collector never reads half a file.
    static func write(_ text: String, to file: String, logger: Logger?) {
        let temporary = "\(file).\(getpid()).tmp"
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: temporary))
            guard rename(temporary, file) == 0 else { throw CocoaError(.fileWriteUnknown) }
        } catch {
            unlink(temporary)
            logger?.warning("cannot write the metrics file", metadata: ["file": "\(file)", "error": "\(error)"])
        }
    }
}
