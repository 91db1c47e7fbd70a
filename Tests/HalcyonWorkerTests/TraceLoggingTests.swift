import Foundation
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// A job enqueued with a traceparent: every log line about it carries the enqueuer's trace id
/// (`trace_id`), whatever its outcome; a job without one has none, beside it in the same run.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin)"), .workers)
struct TraceLoggingTests {
    let helper = WorkerTests()

    @Test func logLinesAboutAJobCarryItsEnqueuersTraceID() async throws {
        _ = try WorkerTests.published()
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let o = TestEnvironment.origin
        let traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
        let parent = "00-\(traceID)-00f067aa0ba902b7-01"
        var traced = helper.job("\(o)/files/tiny.png?t=\(db.name)&a=1", "resize(4x4)")
        traced.trace = try TraceContext(traceparent: parent)
        // Fails for good (no --file-root): its failure is logged at notice.
        var failing = helper.job("file:///nothing-\(db.name).png", maxAttempts: 1)
        failing.trace = try TraceContext(traceparent: parent, tracestate: "rojo=1")
        let plain = helper.job("\(o)/files/tiny.png?t=\(db.name)&b=1", "resize(4x4)")
        let ids = try await helper.enqueue(db, [traced, failing, plain])
        let w = try await helper.worker(db, store: store, ["--drain", "--no-progress", "--log-level", "debug", "--log-format", "json"])
        #expect(await w.wait(timeout: 180) == 0, "\(w.output.suffix(2000))")
        let rows = try await db.query("SELECT state::text, last_error FROM halcyon.jobs ORDER BY id")
        #expect(rows.rows.map { $0[0] ?? "" } == ["succeeded", "failed", "succeeded"], "\(ids): \(rows.dictionaries)")

        let events = w.output.split(separator: "\n").compactMap { JSONValue.parse(String($0)) }
        func lines(about id: Int64) -> [JSONValue] { events.filter { $0["job"]?.stringValue == "\(id)" } }
        for id in ids.prefix(2) {
            let about = lines(about: id)
            // At least "job claimed" and its outcome.
            #expect(about.count >= 2, "job \(id): \(w.output.suffix(2000))")
            for line in about { #expect(line["trace_id"]?.stringValue == traceID, "\(line.jsonText)") }
        }
        #expect(lines(about: ids[1]).contains { $0["msg"]?.stringValue?.contains("fail") ?? false }, "\(w.output.suffix(2000))")
        let untraced = lines(about: ids[2])
        #expect(!untraced.isEmpty && untraced.allSatisfy { $0["trace_id"] == nil }, "\(untraced.map(\.jsonText))")
    }
}
