import Foundation
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// Spans exported to a real OTLP/HTTP receiver (scripts/test-otlp-receiver.py, which decodes with
/// OpenTelemetry's own protobuf definitions), from workers in this process: the span tree of a
/// job enqueued with a traceparent, a store hit's, retries in one trace, link mode, and a
/// collector that is dead, hanging or refusing.
@Suite(.enabled(if: TestEnvironment.available && OTLPCollector.available, "needs scripts/test (PostgreSQL, origin, OTLP receiver)"), .workers)
struct TracingTests {
    let helper = WorkerTests()
    static let enqueuerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let enqueuerSpan = "00f067aa0ba902b7"
    static let traceparent = "00-\(enqueuerTrace)-\(enqueuerSpan)-01"

    /// A drained worker with tracing sent to `endpoint` (spans exported every 100 ms).
    func drain(
        _ db: TestDatabase, store: URL, endpoint: String, _ extra: [String] = [], environment: [String: String] = [:]
    ) async throws
        -> TestWorker
    {
        var variables = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_SERVICE_NAME": "halcyon-test"]
        variables.merge(environment) { $1 }
        let w = try TestWorker(
            WorkerTests.workArguments(store: store) + ["--drain", "--no-progress"] + extra, conninfo: db.conninfo, environment: variables)
        #expect(await w.wait(timeout: 180) == 0, "\(w.output.suffix(3000))")
        return w
    }

    static func spans(_ all: [JSONValue], trace: String) -> [JSONValue] { all.filter { $0["trace_id"]?.stringValue == trace } }

    @Test func aJobIsAChildOfItsEnqueuerWithItsStagesAndAStoreHitHasNoImageWork() async throws {
        _ = try WorkerTests.published()
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let collector = OTLPCollector("tree")
        let source = "\(TestEnvironment.origin)/files/photo.jpg?t=\(db.name)&secret=hunter2"
        var first = helper.job(source, "resize(64x64) |> sharpen(1) |> format(webp, quality=70)")
        first.trace = try TraceContext(traceparent: Self.traceparent, tracestate: "rojo=00f067aa0ba902b7")
        let firstID = try await helper.enqueue(db, [first])[0]
        _ = try await drain(db, store: store, endpoint: collector.endpoint)
        // The same job again: a store hit, in a trace of its own (no traceparent).
        let secondID = try await helper.enqueue(db, [helper.job(source, "resize(64x64) |> sharpen(1) |> format(webp, quality=70)")])[0]
        _ = try await drain(db, store: store, endpoint: collector.endpoint)

        let rows = try await db.query("SELECT id, state::text, trace_id, cache_hit FROM halcyon.jobs ORDER BY id")
        #expect(rows.rows.map { $0[1] ?? "" } == ["succeeded", "succeeded"], "\(rows.dictionaries)")
        #expect(rows.value(0, "trace_id") == Self.enqueuerTrace)
        let secondTrace = try #require(rows.value(1, "trace_id"), "\(rows.dictionaries)")
        #expect(secondTrace.count == 32 && secondTrace != Self.enqueuerTrace)

        let all = try await collector.waitForSpans { Self.spans($0, trace: secondTrace).count >= 2 }
        #expect(try collector.undecodable() == 0)
        let tree = Self.spans(all, trace: Self.enqueuerTrace)
        let process = try #require(tree.first { $0["name"]?.stringValue == "process default" }, "\(all.map(\.jsonText))")
        #expect(process["parent_span_id"]?.stringValue == Self.enqueuerSpan)
        #expect(process["kind"]?.numberValue == 5)  // consumer
        #expect(process["trace_state"]?.stringValue == "rojo=00f067aa0ba902b7")
        let attributes = try #require(process["attributes"])
        #expect(attributes["messaging.system"]?.stringValue == "halcyon")
        #expect(attributes["messaging.destination.name"]?.stringValue == "default")
        #expect(attributes["messaging.message.id"]?.stringValue == "\(firstID)")
        #expect(attributes["halcyon.job.attempt"]?.stringValue == "1" || attributes["halcyon.job.attempt"]?.numberValue == 1)
        #expect(attributes["halcyon.job.outcome"]?.stringValue == "succeeded")
        #expect(attributes["halcyon.job.queue_wait_ms"]?.numberValue != nil)
        #expect(process["resource"]?["service.name"]?.stringValue == "halcyon-test")
        #expect(process["scope"]?["name"]?.stringValue == "halcyon")
        let processID = try #require(process["span_id"]?.stringValue)
        let children = tree.filter { $0["parent_span_id"]?.stringValue == processID }
        #expect(
            children.compactMap { $0["name"]?.stringValue }.sorted() == ["decode", "encode", "fetch", "store", "transform"], "\(tree.map(\.jsonText))"
        )
        func time(_ span: JSONValue, _ key: String) -> UInt64 { span[key]?.stringValue.flatMap { UInt64($0) } ?? 0 }
        for child in children {
            // Within the process span (a millisecond's slack: the stages' ends are computed from their durations).
            #expect(time(child, "start") + 1_000_000 >= time(process, "start") && time(child, "end") <= time(process, "end") + 1_000_000)
            #expect(time(child, "start") <= time(child, "end"), "\(child.jsonText)")
        }
        let fetch = try #require(children.first { $0["name"]?.stringValue == "fetch" })
        #expect(fetch["kind"]?.numberValue == 3)  // client
        #expect(fetch["attributes"]?["server.address"]?.stringValue == "127.0.0.1")
        #expect(fetch["attributes"]?["http.response.body.size"] != nil)
        #expect(
            fetch["attributes"]?["halcyon.fetch.source_index"]?.numberValue == 0 && fetch["attributes"]?["halcyon.fetch.attempts"]?.numberValue == 1)
        // Never the source's query string, path or anything after the host.
        #expect(!tree.contains { $0.jsonText.contains("hunter2") || $0.jsonText.contains("photo.jpg") }, "\(tree.map(\.jsonText))")
        let transform = try #require(children.first { $0["name"]?.stringValue == "transform" })
        #expect(transform["events"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["resize", "sharpen", "format"])
        let encode = try #require(children.first { $0["name"]?.stringValue == "encode" })
        #expect(encode["attributes"]?["halcyon.image.format"]?.stringValue == "webp")
        #expect(
            encode["attributes"]?["halcyon.image.quality"]?.numberValue == 70 || encode["attributes"]?["halcyon.image.quality"]?.stringValue == "70")
        let stored = try #require(children.first { $0["name"]?.stringValue == "store" })
        #expect(stored["attributes"]?["halcyon.store.outcome"]?.stringValue == "written")

        // The store hit: a process span, a root, with one `store` child (a hit) and no image work.
        let hit = Self.spans(all, trace: secondTrace)
        let hitProcess = try #require(hit.first { $0["name"]?.stringValue == "process default" }, "\(hit.map(\.jsonText))")
        #expect(hitProcess["parent_span_id"]?.stringValue == "")
        #expect(hitProcess["attributes"]?["messaging.message.id"]?.stringValue == "\(secondID)")
        #expect(hit.compactMap { $0["name"]?.stringValue }.sorted() == ["process default", "store"])
        #expect(hit.first { $0["name"]?.stringValue == "store" }?["attributes"]?["halcyon.store.outcome"]?.stringValue == "hit")
    }

    @Test func retriesAreAttemptsInOneTraceAndLinkModeKeepsTheEnqueuersTraceApart() async throws {
        _ = try WorkerTests.published()
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let collector = OTLPCollector("retry")
        // Fails once (503), then succeeds: two attempts.
        var job = helper.job("\(TestEnvironment.origin)/fail/1/503/\(db.name)/tiny.png", "resize(8x8)")
        job.trace = try TraceContext(traceparent: Self.traceparent)
        // A source that is not there, then a fallback that is: a fetch span for each.
        let fallback = helper.job(
            "\(TestEnvironment.origin)/status/404?t=\(db.name)", "resize(8x8)", fallbacks: ["\(TestEnvironment.origin)/files/tiny.png?t=\(db.name)"])
        let ids = try await helper.enqueue(db, [job, fallback])
        let id = ids[0]
        _ = try await drain(
            db, store: store, endpoint: collector.endpoint, ["--retry-base", "0s", "--fetch-retries", "0", "--trace-parent", "link"])
        let row = try await db.query("SELECT state::text, attempt, trace_id FROM halcyon.jobs WHERE id = \(id)")
        #expect(row.value(0, "state") == "succeeded" && row.value(0, "attempt") == "2", "\(row.dictionaries)")
        let trace = try #require(row.value(0, "trace_id"))
        #expect(trace != Self.enqueuerTrace, "link mode: a trace of the job's own")
        let spans = try await collector.waitForSpans {
            Self.spans($0, trace: trace).filter { $0["name"]?.stringValue == "process default" }.count >= 2
        }
        let processes = Self.spans(spans, trace: trace).filter { $0["name"]?.stringValue == "process default" }
        #expect(processes.count == 2, "\(spans.map(\.jsonText))")
        let byAttempt = Dictionary(grouping: processes) { $0["attributes"]?["halcyon.job.attempt"]?.numberValue ?? 0 }
        #expect(byAttempt[1]?.first?["attributes"]?["halcyon.job.outcome"]?.stringValue == "retried")
        #expect(byAttempt[1]?.first?["attributes"]?["error.type"]?.stringValue == "fetch.http_status")
        #expect(byAttempt[1]?.first?["status"]?["code"]?.numberValue == 2)
        #expect(byAttempt[2]?.first?["attributes"]?["halcyon.job.outcome"]?.stringValue == "succeeded")
        for process in processes {
            #expect(process["parent_span_id"]?.stringValue == "")
            let links = process["links"]?.arrayValue ?? []
            #expect(links.contains { $0["trace_id"]?.stringValue == Self.enqueuerTrace && $0["span_id"]?.stringValue == Self.enqueuerSpan })
        }
        #expect(Self.spans(spans, trace: Self.enqueuerTrace).isEmpty)
        // The first attempt's fetch: the 503, with its status.
        let failedFetch = Self.spans(spans, trace: trace).first {
            $0["name"]?.stringValue == "fetch" && $0["attributes"]?["http.response.status_code"]?.numberValue == 503
        }
        #expect(failedFetch?["attributes"]?["error.type"]?.stringValue == "fetch.http_status", "\(spans.map(\.jsonText))")

        let fallbackTrace = try #require(
            try await db.query("SELECT trace_id FROM halcyon.jobs WHERE id = \(ids[1])").value(0, "trace_id"))
        let tried = try await collector.waitForSpans { Self.spans($0, trace: fallbackTrace).filter { $0["name"]?.stringValue == "fetch" }.count >= 2 }
        let fetches = Self.spans(tried, trace: fallbackTrace).filter { $0["name"]?.stringValue == "fetch" }
            .sorted {
                ($0["attributes"]?["halcyon.fetch.source_index"]?.numberValue ?? 9)
                    < ($1["attributes"]?["halcyon.fetch.source_index"]?.numberValue ?? 9)
            }
        #expect(fetches.count == 2, "\(tried.map(\.jsonText))")
        #expect(fetches.first?["attributes"]?["http.response.status_code"]?.numberValue == 404)
        #expect(fetches.first?["status"]?["code"]?.numberValue == 2)
        #expect(fetches.last?["attributes"]?["halcyon.fetch.source_index"]?.numberValue == 1)
        #expect(fetches.last?["attributes"]?["http.response.body.size"] != nil && fetches.last?["status"]?["code"]?.numberValue == 0)
    }

    @Test func aDeadHangingOrRefusingCollectorCostsTheJobsNothingAndDropsAreCounted() async throws {
        _ = try WorkerTests.published()
        let collector = OTLPCollector("faults")
        // A port nothing listens on.
        let dead = "http://127.0.0.1:\(try ReplicatedCluster.freePort())/v1/traces"
        var seconds: [String: Double] = [:]
        for (name, endpoint) in [("off", ""), ("dead", dead), ("hanging", collector.hangingEndpoint), ("refusing", collector.refusingEndpoint)] {
            let db = try await TestDatabase.create()
            let store = try TestEnvironment.temporaryDirectory("store")
            let jobs = (0..<60).map { helper.job("\(TestEnvironment.origin)/files/tiny.png?t=\(db.name)&n=\($0)", "resize(4x4)") }
            _ = try await helper.enqueue(db, jobs)
            let started = ContinuousClock.now
            // Exports every 100 ms, each allowed 5 s: a hanging collector holds the export thread.
            let w = try await drain(
                db, store: store, endpoint: endpoint, ["--grace", "2s"], environment: ["OTEL_EXPORTER_OTLP_TIMEOUT": "5000"])
            seconds[name] = (ContinuousClock.now - started).seconds
            let states = try await db.query("SELECT state::text, count(*) AS n FROM halcyon.jobs GROUP BY 1")
            #expect(states.dictionaries == [["state": "succeeded", "n": "60"]], "\(name): \(states.dictionaries)")
            let dropped = w.metricsText.split(separator: "\n").first { $0.hasPrefix("halcyon_trace_spans_dropped_total") }
            if name == "off" {
                #expect(try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE trace_id IS NOT NULL").value(0, "n") == "0")
            } else {
                // Every job's spans (a process span and five children) were dropped, none exported.
                let count = dropped.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
                #expect(count >= 60 * 6 || name == "hanging", "\(name): \(dropped ?? "no metric")")
                #expect(count > 0, "\(name): \(dropped ?? "no metric")")
            }
        }
        // Neither the drain nor the exit is held back: a hung export is given up at the stop
        // after `SpanExporter.stallLimit` (a quarter of a second), well within the grace.
        let off = seconds["off"] ?? 0
        for name in ["dead", "hanging", "refusing"] {
            #expect((seconds[name] ?? .infinity) <= off * 1.25 + 1.5, "\(seconds)")
        }
        print("tracing drain seconds: \(seconds)")
    }

    @Test func aStopFlushesTheSpansItHolds() async throws {
        _ = try WorkerTests.published()
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let collector = OTLPCollector("flush")
        _ = try await helper.enqueue(db, [helper.job("\(TestEnvironment.origin)/files/tiny.png?t=\(db.name)", "resize(4x4)")])
        // Spans exported only every minute: only the stop's flush sends them.
        _ = try await drain(db, store: store, endpoint: collector.endpoint, environment: ["OTEL_BSP_SCHEDULE_DELAY": "60000"])
        let spans = try collector.spans()
        #expect(spans.compactMap { $0["name"]?.stringValue }.sorted() == ["decode", "encode", "fetch", "process default", "store", "transform"])
    }

    @Test func webhooksAreSpansOfTheJobsTraceAndLogLinesNameTheSpan() async throws {
        let (png, _) = try WorkerTests.published()
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let collector = OTLPCollector("webhook")
        let secret = "s-\(db.name)"
        let receiver = "\(TestEnvironment.origin)/webhook/\(db.name)/1?secret=\(secret)"
        let id = try #require(
            try await db.query(
                """
                SELECT halcyon.enqueue($1, processors => 'format(png)', options => jsonb_build_object('callback_url', $2::text),
                                       traceparent => $3) AS id
                """, ["\(TestEnvironment.origin)/files/\(png)?t=\(db.name)", receiver, Self.traceparent]
            ).value(0, "id").flatMap { Int64($0) })
        let w = try TestWorker(
            WorkerTests.workArguments(store: store) + [
                "--webhook-secret", secret, "--poll-interval", "200ms", "--log-format", "json", "--log-level", "debug",
            ],
            conninfo: db.conninfo,
            environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": collector.baseEndpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"])
        try await w.ready()
        // The first delivery gets a 500, the second a 200.
        let delivered = try await waitUntil(60) {
            try await db.query("SELECT callback_status FROM halcyon.jobs WHERE id = \(id)").value(0, "callback_status") == "delivered"
        }
        #expect(delivered, "\(w.output.suffix(3000))")
        let spans = try await collector.waitForSpans { $0.filter { $0["name"]?.stringValue == "webhook" }.count >= 2 }
        let webhooks = spans.filter { $0["name"]?.stringValue == "webhook" }
        #expect(webhooks.count == 2, "\(spans.map(\.jsonText))")
        for span in webhooks {
            #expect(span["trace_id"]?.stringValue == Self.enqueuerTrace && span["parent_span_id"]?.stringValue == Self.enqueuerSpan)
            #expect(span["kind"]?.numberValue == 3 && span["attributes"]?["halcyon.job.id"]?.numberValue == Double(id))
        }
        #expect(webhooks.filter { $0["status"]?["code"]?.numberValue == 2 }.count == 1)
        // Each attempt's traceparent names its own webhook span, in the job's trace.
        guard case .array(let deliveries)? = JSONValue.parse(try Origin.get("\(TestEnvironment.origin)/_webhooks/\(db.name)")) else {
            Issue.record("no deliveries")
            return
        }
        let sent = Set(deliveries.compactMap { $0["traceparent"]?.stringValue })
        let expected = Set(webhooks.compactMap { $0["span_id"]?.stringValue }.map { "00-\(Self.enqueuerTrace)-\($0)-01" })
        #expect(sent == expected && sent.count == 2, "\(sent) vs \(expected)")
        // The log lines about the job name its trace and its process span.
        let process = try #require(spans.first { $0["name"]?.stringValue == "process default" })
        let lines = w.output.split(separator: "\n").compactMap { JSONValue.parse(String($0)) }.filter { $0["job"]?.stringValue == "\(id)" }
        #expect(lines.contains { $0["msg"]?.stringValue == "job claimed" }, "\(w.output.suffix(3000))")
        #expect(
            lines.filter { $0["span_id"] != nil }.count >= 2
                && lines.allSatisfy { $0["trace_id"]?.stringValue == Self.enqueuerTrace }
                && lines.compactMap { $0["span_id"]?.stringValue }.allSatisfy { $0 == process["span_id"]?.stringValue },
            "\(lines.map(\.jsonText))")
        w.signal(SIGTERM)
        #expect(await w.wait(timeout: 60) == 0)
    }
}
