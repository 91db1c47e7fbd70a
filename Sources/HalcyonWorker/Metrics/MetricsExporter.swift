import Foundation
import HalcyonCore
import Logging
import Prometheus
import ServiceLifecycle

/// Publishes a Prometheus registry: an HTTP endpoint (`/metrics`, plus `/healthz` for container
/// health checks) and/or a file rewritten atomically every 15 s for node_exporter's textfile
/// collector. Either, both or neither. A `Service`: on graceful shutdown it stops the endpoint
/// and writes the file a last time.
public struct MetricsExporter: Service {
    private let server: HTTPServer?
    private let file: String?
    private let registry: PrometheusCollectorRegistry
    private let logger: Logger
    /// Between two writes of the file.
    public static let fileInterval: Duration = .seconds(15)

    /// Starts the endpoint at once (so a bad port fails before the worker starts).
    public init(registry: PrometheusCollectorRegistry, port: Int?, address: String = "127.0.0.1", file: String?, logger: Logger) throws {
        self.registry = registry
        self.file = file
        self.logger = logger
        if let port {
            let server = try HTTPServer(host: address, port: port) { [registry] method, target in
                switch (method, target.split(separator: "?").first ?? "") {
                case ("GET", "/metrics"), ("HEAD", "/metrics"):
                    return HTTPServer.Response(
                        status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8",
                        body: Data(Self.text(registry).utf8))
                case ("GET", "/healthz"), ("HEAD", "/healthz"):
                    return .text(200, "ok\n")
                default:
                    return .text(404, "not found: try /metrics or /healthz\n")
                }
            }
            logger.info("metrics endpoint listening", metadata: ["url": "http://\(address):\(server.port)/metrics"])
            self.server = server
        } else {
            server = nil
        }
    }

    public func run() async {
        if let file {
            while !Task.isShuttingDownGracefully, !Task.isCancelled {
                Self.write(Self.text(registry), to: file, logger: logger)
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: Self.fileInterval) }
            }
        } else {
            try? await gracefulShutdown()
        }
        finish()
    }

    /// Stops the endpoint and writes the file a last time.
    public func finish() {
        server?.stop()
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
