import Foundation
import HalcyonCore
import Logging

/// Publishes a worker's metrics: an HTTP endpoint (`/metrics`, plus `/healthz` for container
/// health checks) and/or a file rewritten atomically every 15 s for node_exporter's textfile
/// collector. Either, both or neither.
public final class MetricsExporter: Sendable {
    private let server: HTTPServer?
    private let writer: Task<Void, Never>?
    private let file: String?
    private let worker: Worker

    public init(worker: Worker, port: Int?, address: String = "127.0.0.1", file: String?, logger: Logger) throws {
        self.worker = worker
        self.file = file
        if let port {
            let s = try HTTPServer(host: address, port: port) { [worker] method, target in
                switch (method, target.split(separator: "?").first ?? "") {
                case ("GET", "/metrics"), ("HEAD", "/metrics"):
                    return HTTPServer.Response(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8",
                                               body: Data(worker.metricsText().utf8))
                case ("GET", "/healthz"), ("HEAD", "/healthz"):
                    return .text(200, "ok\n")
                default:
                    return .text(404, "not found: try /metrics or /healthz\n")
                }
            }
            logger.info("metrics endpoint listening", metadata: ["url": "http://\(address):\(s.port)/metrics"])
            server = s
        } else {
            server = nil
        }
        if let file {
            writer = Task.detached {
                while !Task.isCancelled {
                    Self.write(worker.metricsText(), to: file, logger: logger)
                    try? await Task.sleep(for: .seconds(15))
                }
            }
        } else {
            writer = nil
        }
    }

    /// Stops the endpoint and writes the file a last time.
    public func finish() {
        server?.stop()
        writer?.cancel()
        if let file { Self.write(worker.metricsText(), to: file, logger: nil) }
    }

    /// Writes beside the target and renames, so a collector never reads half a file.
    static func write(_ text: String, to file: String, logger: Logger?) {
        let tmp = "\(file).\(getpid()).tmp"
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: tmp))
            guard rename(tmp, file) == 0 else { throw CocoaError(.fileWriteUnknown) }
        } catch {
            unlink(tmp)
            logger?.warning("cannot write the metrics file", metadata: ["file": "\(file)", "error": "\(error)"])
        }
    }
}
