internal import CCurl
import Foundation
import HalcyonCurl
import HalcyonRuntime
import Logging

/// The worker's span queue and batch exporter: `submit` never blocks and never fails — a span
/// that finds the queue full is dropped and counted — and one thread of its own POSTs batches
/// to the OTLP/HTTP endpoint (every `scheduleDelay`, or as soon as a batch is full), each bounded
/// by the export timeout. A collector that is down, slow or refusing costs the jobs nothing: its
/// batches are dropped and counted (`onDrop`, the `halcyon_trace_spans_dropped_total` metric).
/// `shutdown(within:)` exports what is held and returns by its deadline whatever the collector
/// does.
public final class SpanExporter: @unchecked Sendable {
    public let configuration: TracingConfiguration
    private let resource: Attributes
    private let onDrop: @Sendable (Int) -> Void
    private let logger: Logger
    private let condition = NSCondition()
    // Guarded by `condition`:
    private var queue: [SpanRecord] = []
    private var stopping = false
    private var finished = false
    private var deadline: ContinuousClock.Instant?
    /// When the export under way began; nil between exports.
    private var exportStarted: ContinuousClock.Instant?
    private var droppedCount = 0
    private var exportedCount = 0
    private var lastFailureLog: ContinuousClock.Instant?
    private var failuresSinceLog = 0

    /// Starts the export thread. `resource` holds attributes beside the configuration's
    /// (`service.version`, `host.name` …).
    public init(
        configuration: TracingConfiguration, resource: Attributes = [], logger: Logger, onDrop: @escaping @Sendable (Int) -> Void = { _ in }
    ) {
        self.configuration = configuration
        var attributes: Attributes = [("service.name", .string(configuration.serviceName))]
        attributes += configuration.resourceAttributes.map { ($0.key, AttributeValue.string($0.value)) }
        for (key, value) in resource where !attributes.contains(where: { $0.key == key }) { attributes.append((key, value)) }
        self.resource = attributes
        self.onDrop = onDrop
        self.logger = logger
        let thread = Thread { [self] in run() }
        thread.name = "halcyon-spans"
        thread.start()
    }

    /// Queues finished spans for export; those the queue has no room for are dropped (counted).
    public func submit(_ spans: [SpanRecord]) {
        guard !spans.isEmpty else { return }
        condition.lock()
        let room = stopping ? 0 : max(0, configuration.maxQueueSize - queue.count)
        queue.append(contentsOf: spans.prefix(room))
        let dropped = spans.count - min(room, spans.count)
        droppedCount += dropped
        if queue.count >= configuration.maxBatchSize { condition.signal() }
        condition.unlock()
        if dropped > 0 { onDrop(dropped) }
    }

    /// Spans dropped so far (queue full, export failed, or left at the shutdown's deadline).
    public var dropped: Int { condition.withLock { droppedCount } }
    /// Spans the endpoint accepted so far.
    public var exported: Int { condition.withLock { exportedCount } }

    /// How long an export may go unanswered before a stop stops waiting for the collector.
    public static let stallLimit: Duration = .milliseconds(250)

    /// Exports what the queue holds and stops the thread, returning by `within` at the latest —
    /// or as soon as an export has gone unanswered for `stallLimit` (a hung collector, which
    /// would otherwise hold the exit for the whole of it). An export still under way then is
    /// abandoned (its thread left blocked, the process free to exit) and what the queue still
    /// holds is counted as dropped.
    public func shutdown(within: Duration) async {
        let deadline = ContinuousClock.now + within
        condition.withLock {
            stopping = true
            self.deadline = deadline
            condition.signal()
        }
        while ContinuousClock.now < deadline {
            let (done, stalled) = condition.withLock { (finished, exportStarted.map { ContinuousClock.now - $0 > Self.stallLimit } ?? false) }
            // A cancelled caller cannot wait: what is left is dropped, as at the deadline.
            if done || stalled || Task.isCancelled { break }
            try? await Task.sleep(for: .milliseconds(5))
        }
        let left = condition.withLock { () -> Int in
            guard !finished else { return 0 }
            let n = queue.count
            queue.removeAll()
            droppedCount += n
            return n
        }
        if left > 0 {
            onDrop(left)
            logger.warning("spans not exported by the stop's deadline were dropped", metadata: ["spans": "\(left)"])
        }
    }

    private func run() {
        let pool = CurlHandlePool(maxIdle: 1)
        while true {
            condition.lock()
            let wakeAt = Date().addingTimeInterval(configuration.scheduleDelay.seconds)
            while !stopping, queue.count < configuration.maxBatchSize, Date() < wakeAt {
                _ = condition.wait(until: wakeAt)
            }
            let batch = Array(queue.prefix(configuration.maxBatchSize))
            queue.removeFirst(batch.count)
            let done = stopping && queue.isEmpty
            let limit = deadline.map { $0 - ContinuousClock.now }
            if !batch.isEmpty { exportStarted = .now }
            condition.unlock()
            if !batch.isEmpty {
                var timeout = configuration.timeout
                if let limit { timeout = min(timeout, limit) }
                export(batch, timeout: timeout, pool: pool)
            }
            if done {
                condition.withLock { finished = true }
                return
            }
        }
    }

    /// POSTs one batch; a failure drops it (counted, and logged at most once a minute).
    private func export(_ batch: [SpanRecord], timeout: Duration, pool: CurlHandlePool) {
        guard let endpoint = configuration.endpoint else { return }
        let body = OTLPEncoding.request(batch, resource: resource, scope: ("halcyon", HalcyonVersion.string))
        let failure: String?
        if timeout <= .zero {
            failure = "no time left before the stop"
        } else {
            failure = Self.post(body, to: endpoint, headers: configuration.headers, timeout: timeout, pool: pool)
        }
        condition.lock()
        exportStarted = nil
        var logNow = false, failures = 0
        if let failure {
            droppedCount += batch.count
            failuresSinceLog += 1
            let now = ContinuousClock.now
            if lastFailureLog.map({ now - $0 >= .seconds(60) }) ?? true {
                logNow = true
                failures = failuresSinceLog
                failuresSinceLog = 0
                lastFailureLog = now
            }
            condition.unlock()
            onDrop(batch.count)
            if logNow {
                logger.warning(
                    "span export failed; its spans were dropped",
                    metadata: [
                        "endpoint": "\(endpoint.host ?? "")", "error": "\(failure)", "spans": "\(batch.count)", "failed_exports": "\(failures)",
                    ])
            }
        } else {
            exportedCount += batch.count
            condition.unlock()
        }
    }

    /// One export request; nil when the endpoint took it (2xx), else why not.
    private static func post(
        _ body: [UInt8], to url: URL, headers: [(name: String, value: String)], timeout: Duration, pool: CurlHandlePool
    )
        -> String?
    {
        guard let handle = pool.take() else { return "curl_easy_init failed" }
        defer { pool.give(handle) }
        var list: UnsafeMutablePointer<curl_slist>? = curl_slist_append(nil, "Content-Type: application/x-protobuf")
        for (name, value) in headers { list = curl_slist_append(list, "\(name): \(value)") }
        list = curl_slist_append(list, "Expect:")  // no 100-continue round trip for a large batch
        defer { curl_slist_free_all(list) }
        let ms = max(1, Int(min(timeout.seconds * 1000, Double(Int32.max)).rounded(.up)))
        hc_setopt_string(handle, CURLOPT_URL, url.absoluteString)
        hc_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")
        hc_setopt_long(handle, CURLOPT_TIMEOUT_MS, ms)
        hc_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, ms)
        hc_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        hc_setopt_slist(handle, CURLOPT_HTTPHEADER, list)
        hc_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
        _ = body.withUnsafeBytes { hc_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: $0.baseAddress!)) }
        // The answer (an ExportTraceServiceResponse, a partial success at most) is not read.
        hc_setopt_write(handle, CURLOPT_WRITEFUNCTION) { _, size, count, _ in size * count }
        let code = curl_easy_perform(handle)
        guard code == CURLE_OK else { return String(cString: curl_easy_strerror(code)) }
        var status = 0
        hc_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return (200..<300).contains(status) ? nil : "HTTP \(status)"
    }
}
