import Foundation
import HalcyonRuntime
import HalcyonTestSupport
import HalcyonTracing
import Logging
import Synchronization
import Testing

/// The exporter against scripts/test's OTLP/HTTP receiver, which decodes with OpenTelemetry's own
/// protobuf definitions (PyPI `opentelemetry-proto`): every field of a span written here is read
/// back there; a hanging or refusing collector never holds `submit` or `shutdown` past its bound.
@Suite(.enabled(if: OTLPCollector.available, "needs scripts/test (the OTLP receiver)"))
struct SpanExporterTests {
    static let logger = Logger(label: "test")

    func configuration(_ endpoint: String, _ adjust: (inout TracingConfiguration) -> Void = { _ in }) throws -> TracingConfiguration {
        var c = try TracingConfiguration(environment: ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"])
        adjust(&c)
        return c
    }

    static func span(_ name: String, trace: TraceID = TraceID.random(), parent: SpanID? = nil) -> SpanRecord {
        let start = WallTime.now()
        return SpanRecord(traceID: trace, spanID: .random(), parentSpanID: parent, name: name, start: start, end: start.adding(seconds: 0.001))
    }

    @Test func everyFieldReachesTheReferenceDecoder() async throws {
        let collector = OTLPCollector("fields")
        var c = try configuration(collector.endpoint)
        c.headers = [("x-api-key", "k1")]
        c.resourceAttributes = [("deployment.environment", "test")]
        let exporter = SpanExporter(configuration: c, resource: [("service.version", .string("9.9"))], logger: Self.logger)
        let trace = try #require(TraceID(hex: "4bf92f3577b34da6a3ce929d0e0e4736"))
        let parent = try #require(SpanID(hex: "00f067aa0ba902b7"))
        let start = WallTime(nanoseconds: 1_700_000_000_123_456_789)
        var span = SpanRecord(
            traceID: trace, spanID: SpanID(0x0102_0304_0506_0708), parentSpanID: parent, traceState: "rojo=1,congo=t61",
            name: "process images", kind: .consumer, start: start, end: start.adding(seconds: 1.5),
            attributes: [
                ("s", .string("héllo")), ("empty", .string("")), ("i", .int(-42)), ("big", .int(1 << 62)), ("d", .double(0.25)),
                ("t", .bool(true)), ("f", .bool(false)), ("list", .strings(["a", "", "c"])),
            ],
            events: [SpanEvent(name: "resize", time: start.adding(seconds: 0.5), attributes: [("halcyon.step.index", .int(0))])],
            links: [SpanContext(traceID: TraceID(high: 1, low: 2), spanID: SpanID(3), flags: 1, traceState: "a=b", isRemote: true)],
            status: .error("it broke"))
        span.parentIsRemote = true
        exporter.submit([span, Self.span("ok child", trace: trace, parent: span.spanID)])
        await exporter.shutdown(within: .seconds(10))
        #expect(exporter.exported == 2 && exporter.dropped == 0)
        #expect(try collector.undecodable() == 0)
        let spans = try collector.spans()
        let got = try #require(spans.first { $0["name"]?.stringValue == "process images" }, "\(spans.map(\.jsonText))")
        #expect(got["trace_id"]?.stringValue == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(got["span_id"]?.stringValue == "0102030405060708")
        #expect(got["parent_span_id"]?.stringValue == "00f067aa0ba902b7")
        #expect(got["trace_state"]?.stringValue == "rojo=1,congo=t61")
        #expect(got["kind"]?.numberValue == 5)
        #expect(got["start"]?.stringValue == "1700000000123456789")
        #expect(got["end"]?.stringValue == "1700000001623456789")
        #expect(got["flags"]?.numberValue == Double(0x301))
        let a = try #require(got["attributes"])
        #expect(a["s"]?.stringValue == "héllo" && a["empty"]?.stringValue == "")
        #expect(a["i"]?.numberValue == -42 && a["big"]?.numberValue == Double(Int64(1) << 62))
        #expect(a["d"]?.numberValue == 0.25)
        #expect(a["t"] == .bool(true) && a["f"] == .bool(false))
        #expect(a["list"]?.arrayValue?.compactMap(\.stringValue) == ["a", "", "c"])
        #expect(got["events"]?.arrayValue?.first?["name"]?.stringValue == "resize")
        #expect(got["events"]?.arrayValue?.first?["time"]?.stringValue == "1700000000623456789")
        #expect(got["events"]?.arrayValue?.first?["attributes"]?["halcyon.step.index"]?.numberValue == 0)
        let link = try #require(got["links"]?.arrayValue?.first)
        #expect(link["trace_id"]?.stringValue == "00000000000000010000000000000002")
        #expect(link["span_id"]?.stringValue == "0000000000000003" && link["trace_state"]?.stringValue == "a=b")
        #expect(link["flags"]?.numberValue == Double(0x301))
        #expect(got["status"]?["code"]?.numberValue == 2 && got["status"]?["message"]?.stringValue == "it broke")
        #expect(got["resource"]?["service.name"]?.stringValue == "halcyon")
        #expect(got["resource"]?["service.version"]?.stringValue == "9.9")
        #expect(got["resource"]?["deployment.environment"]?.stringValue == "test")
        #expect(got["headers"]?["x-api-key"]?.stringValue == "k1")
        #expect(got["headers"]?["content-type"]?.stringValue == "application/x-protobuf")
        let child = try #require(spans.first { $0["name"]?.stringValue == "ok child" })
        #expect(child["parent_span_id"]?.stringValue == "0102030405060708" && child["status"]?["code"]?.numberValue == 0)
    }

    @Test func aFullQueueDropsAndCounts() async throws {
        let collector = OTLPCollector("full")
        let counted = Mutex(0)
        let c = try configuration(collector.endpoint) {
            $0.maxQueueSize = 10
            $0.scheduleDelay = .seconds(60)
            $0.maxBatchSize = 100
        }
        let exporter = SpanExporter(configuration: c, logger: Self.logger) { n in counted.withLock { $0 += n } }
        exporter.submit((0..<25).map { Self.span("s\($0)") })
        #expect(exporter.dropped == 15 && counted.withLock { $0 } == 15)
        await exporter.shutdown(within: .seconds(10))
        #expect(exporter.exported == 10)
        #expect(try collector.spans().count == 10)
    }

    @Test func aHangingOrRefusingCollectorNeverHoldsSubmitOrShutdown() async throws {
        let collector = OTLPCollector("stuck")
        for endpoint in [collector.hangingEndpoint, collector.refusingEndpoint] {
            let counted = Mutex(0)
            let c = try configuration(endpoint) { $0.timeout = .seconds(30) }
            let exporter = SpanExporter(configuration: c, logger: Self.logger) { n in counted.withLock { $0 += n } }
            let started = ContinuousClock.now
            for _ in 0..<50 { exporter.submit((0..<20).map { Self.span("s\($0)") }) }
            #expect(ContinuousClock.now - started < .seconds(1), "submit never waits for the collector")
            try await Task.sleep(for: .milliseconds(300))
            let stopping = ContinuousClock.now
            await exporter.shutdown(within: .seconds(1))
            #expect(ContinuousClock.now - stopping < .seconds(3), "\(endpoint)")
            #expect(exporter.exported == 0)
            // Everything not exported is counted: dropped at once, at a refusal, or at the deadline
            // (a batch the hung export holds is the one part left uncounted).
            #expect(exporter.dropped >= 1000 - c.maxBatchSize && exporter.dropped == counted.withLock { $0 }, "\(endpoint): \(exporter.dropped)")
        }
    }
}
