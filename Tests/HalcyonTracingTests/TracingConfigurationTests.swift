import Foundation
import HalcyonDomain
import HalcyonTracing
import Testing

/// OpenTelemetry's environment variables as the worker reads them, and the ids and samplers.
struct TracingConfigurationTests {
    @Test func offUnlessAnEndpointIsSetAndTheSDKNotDisabled() throws {
        #expect(try !TracingConfiguration(environment: [:]).isEnabled)
        #expect(try !TracingConfiguration(environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"]).isEnabled)
        let base = try TracingConfiguration(environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"])
        #expect(base.endpoint?.absoluteString == "http://c:4318/v1/traces")
        let traces = try TracingConfiguration(environment: [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://t.example/api/traces",
        ])
        #expect(traces.endpoint?.absoluteString == "https://t.example/api/traces")
    }

    @Test func theOtherVariables() throws {
        let c = try TracingConfiguration(environment: [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b, x-tenant=t1",
            "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-resource,deployment.environment=prod", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.25", "OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_BSP_MAX_QUEUE_SIZE": "100",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "10", "OTEL_BSP_SCHEDULE_DELAY": "200", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        ])
        #expect(c.headers.map { "\($0.name)=\($0.value)" } == ["api-key=a b", "x-tenant=t1"])
        #expect(c.serviceName == "from-resource")
        #expect(c.resourceAttributes.map(\.key) == ["deployment.environment"])
        #expect(c.sampler == .parentBased(root: .ratio(0.25)))
        #expect(c.timeout == .milliseconds(2500) && c.scheduleDelay == .milliseconds(200))
        #expect(c.maxQueueSize == 100 && c.maxBatchSize == 10)
        #expect(
            try TracingConfiguration(environment: ["OTEL_SERVICE_NAME": "thumbs", "OTEL_RESOURCE_ATTRIBUTES": "service.name=x"]).serviceName
                == "thumbs")
    }

    @Test(arguments: [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://c", "OTEL_EXPORTER_OTLP_ENDPOINT"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "http/protobuf only"),
        ("OTEL_TRACES_SAMPLER", "sometimes", "OTEL_TRACES_SAMPLER"),
        ("OTEL_TRACES_SAMPLER_ARG", "1.5", "OTEL_TRACES_SAMPLER_ARG"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "-1", "OTEL_EXPORTER_OTLP_TIMEOUT"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "99999999", "OTEL_BSP_MAX_QUEUE_SIZE"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "novalue", "OTEL_EXPORTER_OTLP_HEADERS"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "bad name=1", "OTEL_EXPORTER_OTLP_HEADERS"),
    ])
    func aValueItCannotUseIsAnErrorNamingTheVariable(_ name: String, _ value: String, _ expected: String) {
        var environment = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "traceidratio"]
        environment[name] = value
        #expect {
            _ = try TracingConfiguration(environment: environment)
        } throws: { error in
            guard let e = error as? HalcyonError else { return false }
            return e.code == .invalidOptions && e.message.contains(expected)
        }
    }

    @Test func samplersFollowTheSpecification() throws {
        let parent = try #require(SpanContext(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        let unsampled = try #require(SpanContext(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"))
        let id = TraceID.random()
        #expect(TraceSampler.parentBased(root: .alwaysOff).samples(id, parent: parent))
        #expect(!TraceSampler.parentBased(root: .alwaysOn).samples(id, parent: unsampled))
        #expect(TraceSampler.parentBased(root: .alwaysOn).samples(id, parent: nil))
        #expect(!TraceSampler.alwaysOff.samples(id, parent: parent))
        // A ratio takes about that share of random ids, and always the same ones.
        let ids = (0..<20_000).map { _ in TraceID.random() }
        let share = Double(ids.filter { TraceSampler.ratio(0.25).samples($0, parent: nil) }.count) / Double(ids.count)
        #expect(abs(share - 0.25) < 0.02, "\(share)")
        #expect(ids.prefix(100).allSatisfy { TraceSampler.ratio(0.5).samples($0, parent: nil) == TraceSampler.ratio(0.5).samples($0, parent: nil) })
        #expect(!TraceSampler.ratio(0).samples(id, parent: nil) && TraceSampler.ratio(1).samples(id, parent: nil))
    }

    @Test func traceparentsAreReadAsTheSpecificationSays() {
        #expect(
            SpanContext(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")?.traceparent
                == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        #expect(SpanContext(traceparent: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra")?.sampled == true)
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", "",
        ] {
            #expect(SpanContext(traceparent: bad) == nil, "\(bad)")
        }
        #expect(TraceID(hex: "+bf92f3577b34da6a3ce929d0e0e4736") == nil)
        #expect(TraceID.random().description.count == 32 && SpanID.random().description.count == 16)
    }
}
