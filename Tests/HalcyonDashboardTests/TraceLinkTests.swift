import Foundation
import HalcyonDashboard
import HalcyonQueue
import HalcyonTestSupport
import Testing

/// A job enqueued with a traceparent: its page shows the trace id, linked to the operator's
/// tracing UI with `--trace-url`; a row edited past the table's checks is shown, escaped, and
/// never linked.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct TraceLinkTests {
    static let traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let traceparent = "00-\(traceID)-00f067aa0ba902b7-01"

    @Test func aTracedJobLinksToItsTrace() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("dashboard-trace-store")
        let id = try #require(
            try await db.query(
                "SELECT halcyon.enqueue('https://e.com/a.jpg', traceparent => $1, tracestate => 'rojo=1') AS id", [Self.traceparent]
            ).value(0, "id"))
        let linked = try await DashboardFixture.server(db, store: store) { $0.traceURL = "https://jaeger.example.com/trace/{trace_id}?x=1" }
        defer { linked.stop() }
        let page = try await HTTP.get(linked, "/jobs/\(id)").text
        #expect(page.contains("href=\"https://jaeger.example.com/trace/\(Self.traceID)?x=1\""), "\(page)")
        #expect(page.contains(Self.traceparent) && page.contains("rojo=1"))
        let plain = try await DashboardFixture.server(db, store: store)
        defer { plain.stop() }
        let text = try await HTTP.get(plain, "/jobs/\(id)").text
        #expect(text.contains(Self.traceID) && !text.contains("jaeger"))

        // A job whose spans went to a trace of its own (`trace_id`, link mode): that trace is the link.
        let own = "0af7651916cd43dd8448eb211c80319c"
        try await db.query("UPDATE halcyon.jobs SET trace_id = $1 WHERE id = \(id)", [own])
        let ownPage = try await HTTP.get(linked, "/jobs/\(id)").text
        #expect(ownPage.contains("href=\"https://jaeger.example.com/trace/\(own)?x=1\"") && ownPage.contains(Self.traceparent), "\(ownPage)")
        // The table refuses a trace id that is not one.
        await #expect(throws: (any Error).self) { try await db.query("UPDATE halcyon.jobs SET trace_id = 'ABC' WHERE id = \(id)") }

        // A row whose traceparent the table would refuse (its check dropped): text, not a link.
        try await db.query("ALTER TABLE halcyon.jobs DROP CONSTRAINT jobs_traceparent_format")
        let markup = "00-\"><script>alert(1)</script>-00f067aa0ba902b7-01"
        let hostile = try #require(
            try await db.query("INSERT INTO halcyon.jobs (source, traceparent) VALUES ('https://e.com/b.jpg', $1) RETURNING id", [markup])
                .value(0, "id"))
        let escaped = try await HTTP.get(linked, "/jobs/\(hostile)").text
        #expect(!escaped.contains("<script>alert(1)") && !escaped.contains("jaeger.example.com"), "\(escaped)")
    }

    @Test func aTraceURLMustBeAnHTTPURLHoldingTheTraceID() {
        for url in ["https://jaeger.example.com/trace/{trace_id}", "http://127.0.0.1:16686/trace/{trace_id}"] {
            var c = DashboardConfiguration()
            c.traceURL = url
            #expect(c.problem == nil, "\(url)")
        }
        for url in ["https://jaeger.example.com/trace/", "javascript:alert('{trace_id}')", "ftp://x/{trace_id}", "https:///{trace_id}"] {
            var c = DashboardConfiguration()
            c.traceURL = url
            #expect(c.problem?.contains("--trace-url") == true, "\(url)")
        }
    }
}
