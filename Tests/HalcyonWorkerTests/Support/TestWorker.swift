import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonRuntime
import HalcyonTestSupport
import HalcyonWorker
import Logging
import Prometheus
import ServiceLifecycle
import Synchronization
import Testing

@testable import HalcyonCommands

/// A worker run inside the test process, against the suite's real PostgreSQL, store and origin:
/// `halcyon work`'s options are turned into its configuration by the command's own code
/// (`Work.workerConfiguration`), and it runs as a `Worker` — the claimer, runner, recorder and
/// maintenance services a `halcyon work` image process runs — in the command's own service group
/// with its metrics exporter (`Work.serviceGroup`), its log captured and its metrics a registry of
/// its own. What only a process has (the supervisor, signals, the exit deadline, resident memory,
/// what the process's environment sets) is tested with `HalcyonProcess`.
///
/// It reads like `HalcyonProcess`: `ready()`, `output`, `wait(timeout:)` (0 when `run()`
/// returned, 1 when it threw), `signal(SIGTERM)` for a stop request. A test that runs one
/// carries `.workers` (or `.workers(N)`); whatever its outcome, its workers are stopped when it
/// ends.
final class TestWorker: Sendable {
    let worker: Worker
    let configuration: WorkerConfiguration
    /// Where this worker's metrics go.
    let registry = PrometheusCollectorRegistry()
    private let log: CapturedLog
    /// 0 once `run()` returned, 1 once it threw.
    private let outcome = Shared<Int32?>(nil)
    private let task = Shared<Task<Void, Never>?>(nil)

    /// Starts a worker with `arguments` as `halcyon work` takes them (`work` first or not;
    /// `--database-url` is `conninfo`), with `environment` over this process's variables where
    /// the command reads them (the AWS variables, `HALCYON_FILE_ROOTS`, …), and `adjust` applied
    /// to the configuration the command made (for settings no option reaches).
    init(
        _ arguments: [String], conninfo: String, environment: [String: String] = [:],
        adjust: (inout WorkerConfiguration) -> Void = { _ in }, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        if ProcessTurns.held == 0 {
            Issue.record("a test that runs a worker must carry the .workers trait (ProcessTurns)", sourceLocation: sourceLocation)
        }
        let options = arguments.first == "work" ? Array(arguments.dropFirst()) : arguments
        let command = try Work.parse(options)
        var variables = ProcessInfo.processInfo.environment
        variables.merge(environment) { $1 }
        var configuration = try command.workerConfiguration(environment: variables)
        adjust(&configuration)
        self.configuration = configuration
        let level = Logger.Level(rawValue: command.logging.logLevel) ?? .info
        let format = LogFormat(rawValue: command.logging.logFormat) ?? .text
        let log = CapturedLog()
        self.log = log
        let logger = Logger(label: "halcyon") { label in CapturedLog.Handler(log: log, label: label, format: format, level: level) }
        let metrics = Metrics(
            processingSlots: configuration.concurrency, fetchSlots: configuration.fetchConcurrency,
            factory: Metrics.prometheusFactory(registry: registry))
        let worker = Worker(configuration: configuration, conninfo: conninfo, logger: logger, metrics: metrics)
        self.worker = worker
        // The worker with the exporter `--metrics-port` and `--metrics-file` ask for, as the
        // command runs them.
        let group = try command.serviceGroup(worker, registry: registry, logger: logger)
        let outcome = outcome
        let running = Task.detached {
            do {
                try await group.run()
                outcome.withLock { $0 = 0 }
            } catch {
                // What `halcyon work` prints before it exits 1.
                log.append("Error: \(error)")
                outcome.withLock { $0 = 1 }
            }
        }
        task.withLock { $0 = running }
        ProcessTurns.atEnd { [weak self] in await self?.end() }
    }

    /// Everything the worker logged so far, a line each, as `halcyon work` writes them.
    var output: String { log.text }

    var isRunning: Bool { outcome.withLock { $0 } == nil }

    /// A stop request, as `halcyon work` makes of SIGTERM and SIGINT (a second one releases
    /// every held job at once). Any other signal is a mistake: an in-process worker cannot die.
    func signal(_ sig: Int32, sourceLocation: SourceLocation = #_sourceLocation) {
        guard sig == SIGTERM || sig == SIGINT else {
            Issue.record("an in-process worker takes only SIGTERM or SIGINT (a stop request), not \(sig)", sourceLocation: sourceLocation)
            return
        }
        worker.requestStop()
    }

    /// Waits up to `timeout` seconds for `run()` to end: 0 when it returned, 1 when it threw
    /// (the error is the last line of `output`); nil when it did not end in time, and then it is
    /// stopped.
    func wait(timeout: Double) async -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let status = outcome.withLock({ $0 }) { return status }
            try? await Task.sleep(for: .milliseconds(20))
        }
        if let status = outcome.withLock({ $0 }) { return status }
        await end()
        return nil
    }

    /// Waits until the output contains `text` (true), or the worker has ended or `timeout`
    /// seconds passed (false).
    func waitForOutput(_ text: String, timeout: Double = 120) async throws -> Bool {
        try await waitUntil(timeout) { output.contains(text) || !isRunning } && output.contains(text)
    }

    /// Waits until the worker is registered and its services run (the "worker started" line),
    /// and records an issue with its output when it is not within `timeout` seconds.
    @discardableResult
    func ready(timeout: Double = 120, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Bool {
        let ready = try await waitForOutput("worker started", timeout: timeout)
        if !ready {
            Issue.record("the worker was not ready within \(Int(timeout)) s: \(output.suffix(2000))", sourceLocation: sourceLocation)
        }
        return ready
    }

    /// This worker's metrics in Prometheus's text format, as `/metrics` serves them.
    var metricsText: String {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    /// Stops the worker at once (two stop requests: held jobs are released) and waits a little
    /// for it; then abandons it (its task cancelled).
    func end() async {
        guard isRunning else { return }
        worker.requestStop()
        worker.requestStop()
        for _ in 0..<250 where isRunning { try? await Task.sleep(for: .milliseconds(20)) }
        task.withLock { $0?.cancel() }
    }
}

/// A value behind a lock, shared by reference.
final class Shared<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func withLock<T>(_ body: (inout Value) -> T) -> T { value.withLock { body(&$0) } }
}

/// Log lines kept in memory, formatted as `halcyon work` writes them (`HalcyonLogHandler.line`).
final class CapturedLog: Sendable {
    private let lines = Mutex<[String]>([])

    func append(_ line: String) { lines.withLock { $0.append(line) } }

    var text: String { lines.withLock { $0.joined(separator: "\n") + ($0.isEmpty ? "" : "\n") } }

    struct Handler: LogHandler {
        let log: CapturedLog
        let label: String
        let format: LogFormat
        var logLevel: Logger.Level
        var metadata: Logger.Metadata = [:]

        init(log: CapturedLog, label: String, format: LogFormat, level: Logger.Level) {
            self.log = log
            self.label = label
            self.format = format
            self.logLevel = level
        }

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var merged = metadata.merging(event.metadata ?? [:]) { $1 }
            if let error = event.error { merged["error"] = "\(error)" }
            log.append(
                HalcyonLogHandler.line(
                    time: ISO8601.format(Date()), level: event.level, message: event.message.description, label: label, metadata: merged,
                    format: format))
        }
    }
}
