import Foundation
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import HalcyonTracing
import Logging

/// One attempt's trace, decided right after the claim (`JobTracer.begin`): the id of its
/// `process` span, the trace it is in, and whose child or link it is.
struct JobTrace: Sendable {
    var traceID: TraceID
    var spanID: SpanID
    /// The enqueuer's span, in child mode.
    var parent: SpanContext?
    /// The enqueuer's span, in link mode.
    var link: SpanContext?
    var traceState: String?
    /// When the attempt began (the claim).
    var start: WallTime

    /// A child span of this attempt's `process` span.
    func child(_ stage: StageSpan) -> SpanRecord {
        SpanRecord(
            traceID: traceID, spanID: stage.spanID, parentSpanID: spanID, traceState: traceState, name: stage.name,
            kind: stage.kind, start: stage.start, end: stage.end, attributes: stage.attributes, events: stage.events,
            links: stage.links, status: stage.status)
    }

    /// This attempt's `process` span as another span links to it.
    var context: SpanContext { SpanContext(traceID: traceID, spanID: spanID, traceState: traceState) }
}

/// A webhook delivery's span while it is under way.
struct WebhookSpan: Sendable {
    var context: SpanContext
    var parent: SpanContext?
    var start: WallTime

    /// The delivery's `traceparent` header: this span, so that the receiver's spans are its children.
    var traceparent: String { context.traceparent }
}

/// A stage of a job's attempt — fetch, decode, transform, encode, store — as the runner measured
/// it: a child of the job's `process` span.
struct StageSpan: Sendable {
    var name: String
    var spanID = SpanID.random()
    var kind = SpanKind.internal
    var start: WallTime
    var end: WallTime
    var attributes: Attributes = []
    var events: [SpanEvent] = []
    var links: [SpanContext] = []
    var status = SpanStatus.unset
}

/// The worker's spans: decides whether each claimed job is traced (the sampler, the enqueuer's
/// context and `--trace-parent`), and once its outcome is recorded turns what the runner
/// measured into the `process {queue}` span and its children, handed to the `SpanExporter`.
final class JobTracer: Sendable {
    let configuration: TracingConfiguration
    let exporter: SpanExporter
    let workerID: String

    init(configuration: TracingConfiguration, workerID: String, metrics: Metrics, logger: Logger) {
        self.configuration = configuration
        self.workerID = workerID
        exporter = SpanExporter(
            configuration: configuration,
            resource: [
                ("service.version", .string(HalcyonVersion.string)), ("host.name", .string(ProcessInfo.processInfo.hostName)),
                ("service.instance.id", .string(workerID)),
            ],
            logger: logger, onDrop: { [metrics] in metrics.spansDropped($0) })
    }

    /// This attempt's trace, or nil when it is not sampled. A job enqueued with a traceparent is
    /// in the enqueuer's trace (child mode); otherwise in the trace an earlier attempt recorded,
    /// or a new one.
    func begin(_ job: Job, at start: WallTime) -> JobTrace? {
        let enqueuer = job.traceparent.flatMap { SpanContext(traceparent: $0, tracestate: job.tracestate) }
        var trace = JobTrace(traceID: TraceID.random(), spanID: SpanID.random(), start: start)
        switch configuration.parentMode {
        case .child where enqueuer != nil:
            trace.parent = enqueuer
            trace.traceID = enqueuer!.traceID
            trace.traceState = enqueuer?.traceState
        case .child, .link, .none:
            if configuration.parentMode == .link { trace.link = enqueuer }
            if let recorded = job.recordedTraceID.flatMap({ TraceID(hex: $0) }) { trace.traceID = recorded }
        }
        guard configuration.sampler.samples(trace.traceID, parent: trace.parent) else { return nil }
        return trace
    }

    /// Exports one attempt: its `process {queue}` span (kind consumer), linked to the enqueuer's
    /// span in link mode and to `links` (a download another job's trace holds), and its stages'
    /// spans as its children.
    func finish(_ job: Job, _ trace: JobTrace, stages: [StageSpan], links: [SpanContext], outcome: JobOutcome, error: HalcyonError?) {
        var attributes: Attributes = [
            ("messaging.system", .string("halcyon")), ("messaging.operation.type", .string("process")),
            ("messaging.operation.name", .string("process")), ("messaging.destination.name", .string(job.queue)),
            ("messaging.message.id", .string("\(job.id)")), ("messaging.consumer.group.name", .string(job.queue)),
            ("messaging.client.id", .string(workerID)),
            ("halcyon.job.id", .int(job.id)), ("halcyon.job.attempt", .int(Int64(job.attempt))),
            ("halcyon.job.max_attempts", .int(Int64(job.maxAttempts))),
            ("halcyon.job.queue_wait_ms", .double((job.queueWait * 10_000).rounded() / 10)),
            ("halcyon.job.outcome", .string(outcome.rawValue)),
        ]
        if let fairKey = job.fairKey { attributes.append(("halcyon.job.fair_key", .string(String(fairKey.prefix(200))))) }
        var status = SpanStatus.unset
        if let error {
            attributes.append(("error.type", .string(error.code.description)))
            status = .error(String(error.message.prefix(1000)))
        }
        var process = SpanRecord(
            traceID: trace.traceID, spanID: trace.spanID, parentSpanID: trace.parent?.spanID, traceState: trace.traceState,
            name: "process \(job.queue)", kind: .consumer, start: trace.start, end: WallTime.now(), attributes: attributes,
            links: (trace.link.map { [$0] } ?? []) + links, status: status)
        process.parentIsRemote = trace.parent != nil
        exporter.submit([process] + stages.map(trace.child))
    }

    /// A webhook delivery's span, begun: in the trace the job's spans went to (`trace_id`), a
    /// child of the enqueuer's span when the job is in the enqueuer's trace; nil for a job that
    /// was not traced.
    func webhookSpan(_ callback: JobQueue.Callback) -> WebhookSpan? {
        guard let traceID = callback.recordedTraceID.flatMap({ TraceID(hex: $0) }) else { return nil }
        let enqueuer = callback.traceparent.flatMap { SpanContext(traceparent: $0, tracestate: callback.tracestate) }
        let parent = enqueuer?.traceID == traceID ? enqueuer : nil
        return WebhookSpan(
            context: SpanContext(traceID: traceID, spanID: .random(), traceState: parent?.traceState), parent: parent, start: .now())
    }

    /// Exports a delivery's `webhook` span (kind client): the receiver's host, the attempt, and
    /// the error of a failed one.
    func finish(_ span: WebhookSpan, _ callback: JobQueue.Callback, error: HalcyonError?) {
        var attributes: Attributes = [
            ("halcyon.job.id", .int(callback.jobID)), ("halcyon.webhook.attempt", .int(Int64(callback.attempt))),
            ("http.request.method", .string("POST")),
        ]
        if let url = URL(string: callback.url), let host = url.host {
            attributes.append(("server.address", .string(host)))
            if let port = url.port { attributes.append(("server.port", .int(Int64(port)))) }
        }
        var status = SpanStatus.unset
        if let error {
            attributes.append(("error.type", .string(error.code.description)))
            status = .error(String(error.message.prefix(500)))
        }
        var record = SpanRecord(
            traceID: span.context.traceID, spanID: span.context.spanID, parentSpanID: span.parent?.spanID,
            traceState: span.context.traceState, name: "webhook", kind: .client, start: span.start, end: .now(), attributes: attributes,
            status: status)
        record.parentIsRemote = span.parent != nil
        exporter.submit([record])
    }

    /// Exports what is held and stops, by `within` at the latest.
    func shutdown(within: Duration) async { await exporter.shutdown(within: within) }
}
