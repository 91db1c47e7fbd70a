import Foundation
import HalcyonTestSupport
import Testing

@testable import HalcyonQueue

/// A job's trace context (`traceparent`, `tracestate`, migration 0022): held to the W3C Trace
/// Context format by the table and the enqueue functions, carried to the claimed job; the CLI's
/// own check (`TraceContext`) agrees with the table's on every case here.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct TraceContextTests {
    static let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    /// Traceparents: the specification's example and edge cases each side of its rules.
    static let traceparents: [(String, Bool)] = [
        (valid, true),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true),
        ("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future-field", true),  // a later version may add fields
        ("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", false),  // version 00 is exactly 55
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false),
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", false),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false),
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", false),  // uppercase
        ("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", false),  // 31 digits
        ("00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", false),
        ("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", false),  // a field must follow a dash
        ("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + String(repeating: "a", count: 460), false),  // over 512
        ("", false), ("00", false), ("not a traceparent", false),
    ]

    /// Tracestates (with a valid traceparent).
    static let tracestates: [(String, Bool)] = [
        ("rojo=00f067aa0ba902b7", true),
        ("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", true),
        ("rojo=1 , ,congo=2", true),  // spaces around members, an empty member
        ("tenant@vendor=v", true),
        ("a*b/c_d-e=x y", true),
        ((0..<32).map { "k\($0)=v" }.joined(separator: ","), true),
        ((0..<33).map { "k\($0)=v" }.joined(separator: ","), false),
        ("k=1,k=2", false),  // a key twice
        ("1abc=v", false),  // a simple key starts with a letter
        ("1abc@vendor=v", true),  // a tenant id may start with a digit
        ("t" + String(repeating: "a", count: 240) + "@v=1", true),  // a tenant id of 241
        ("t" + String(repeating: "a", count: 241) + "@v=1", false),
        ("k" + String(repeating: "a", count: 255) + "=1", true),  // a simple key of 256
        ("k" + String(repeating: "a", count: 256) + "=1", false),
        ("", true), (" , ", true),  // empty lists are allowed (and not sent)
        ("Rojo=1", false),  // uppercase key
        ("rojo=", false),  // empty value
        ("rojo=a ", true),  // a trailing space is the list's own whitespace, trimmed
        ("rojo=a\u{1}b", false),  // a control character
        ("rojo=a=b", false),
        ("rojo", false),
        ("tenant@Vendor=v", false),
        ("k=" + String(repeating: "v", count: 257), false),
        ("k=v," + String(repeating: "a", count: 520), false),  // over 512 bytes
    ]

    @Test func theTableAndTheCLIAgreeOnEveryCase() async throws {
        let db = try await TestDatabase.create()
        for (value, valid) in Self.traceparents {
            let rows = try await db.query("SELECT halcyon.is_valid_traceparent($1) AS ok", [value])
            #expect(rows.value(0, "ok") == (valid ? "t" : "f"), "table: \(value)")
            #expect(TraceContext.isValid(traceparent: value) == valid, "CLI: \(value)")
        }
        for (value, valid) in Self.tracestates {
            let rows = try await db.query("SELECT halcyon.is_valid_tracestate($1) AS ok", [value])
            #expect(rows.value(0, "ok") == (valid ? "t" : "f"), "table: \(value)")
            #expect(TraceContext.isValid(tracestate: value) == valid, "CLI: \(value)")
        }
    }

    /// A malformed value is refused before the insert, by an error naming the argument; a plain
    /// INSERT by the column's check; a tracestate without a traceparent too. Nothing is inserted.
    @Test func malformedContextsAreRefusedNamingTheColumn() async throws {
        let db = try await TestDatabase.create()
        try await db.query("INSERT INTO halcyon.presets (name, processors) VALUES ('thumb', 'resize(10x10)')")
        let refusals: [(String, String)] = [
            ("SELECT halcyon.enqueue('https://e.com/a.jpg', traceparent => '00-bad')", "halcyon.enqueue: traceparent must be a W3C traceparent"),
            (
                "SELECT halcyon.enqueue('https://e.com/a.jpg', traceparent => '\(Self.valid)', tracestate => 'Bad=1')",
                "halcyon.enqueue: tracestate must be a W3C tracestate"
            ),
            ("SELECT halcyon.enqueue('https://e.com/a.jpg', tracestate => 'a=1')", "halcyon.enqueue: tracestate needs a traceparent"),
            (
                "SELECT halcyon.enqueue_variants('https://e.com/a.jpg', ARRAY['thumb'], traceparent => 'ff-x')",
                "halcyon.enqueue_variants: traceparent must be"
            ),
            ("INSERT INTO halcyon.jobs (source, traceparent) VALUES ('https://e.com/a.jpg', 'x')", "jobs_traceparent_format"),
            ("INSERT INTO halcyon.jobs (source, tracestate) VALUES ('https://e.com/a.jpg', 'a=1')", "jobs_tracestate_format"),
        ]
        for (sql, message) in refusals {
            await #expect(Comment(rawValue: sql)) {
                try await db.query(sql)
            } throws: { error in
                let e = error as? DatabaseError
                return e?.sqlState == "23514" && (e?.message.contains(message) ?? false)
            }
        }
        let count = try await db.query("SELECT count(*) AS n FROM halcyon.jobs")
        #expect(count.value(0, "n") == "0")
    }

    /// Every enqueue function stores the context; the claimed job carries the traceparent and its
    /// trace id; a job without one has none. Positional calls of the earlier signatures resolve.
    @Test func theContextTravelsFromEveryEnqueueFunctionToTheClaimedJob() async throws {
        let db = try await TestDatabase.create()
        let queue = JobQueue(connection: try await db.connect())
        try await db.query("INSERT INTO halcyon.presets (name, processors) VALUES ('thumb', 'resize(10x10)'), ('card', 'resize(20x20)')")
        var job = JobQueue.NewJob(source: "https://e.com/a.jpg")
        job.trace = try TraceContext(traceparent: Self.valid, tracestate: "rojo=1")
        let a = try await queue.enqueue(job).id
        try await db.query(
            "SELECT unnest(halcyon.enqueue_variants('https://e.com/b.jpg', ARRAY['thumb', 'card'], traceparent => $1)) AS id", [Self.valid])
        try await db.query("SELECT halcyon.enqueue('https://e.com/c.jpg', '', NULL, '{}', '{}', 0, 5, now(), 'default', NULL, '{}', NULL)")
        let rows = try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE traceparent = $1", [Self.valid])
        #expect(rows.value(0, "n") == "3")
        let stored = try await db.query("SELECT tracestate FROM halcyon.jobs WHERE id = $1", ["\(a)"])
        #expect(stored.value(0, "tracestate") == "rojo=1")
        let claimed = try await queue.claim(workerID: "w", limit: 10, lease: .seconds(30), siblings: false)
        #expect(claimed.count == 4)
        for job in claimed {
            if job.source.hasSuffix("c.jpg") {
                #expect(job.traceparent == nil && job.traceID == nil)
            } else {
                #expect(job.traceparent == Self.valid && job.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
            }
        }
        let shown = try #require(try await queue.job(id: a))
        #expect(shown.traceparent == Self.valid && shown.tracestate == "rojo=1")
    }

    /// A delivery's trace headers come only from values the format allows: a row edited past the
    /// table's checks cannot put a line break (a second header, a second request) into one.
    @Test func webhookHeadersCarryOnlyValidContexts() {
        func headers(_ traceparent: String?, _ tracestate: String?) -> [String: String] {
            JobQueue.Callback(jobID: 1, attempt: 1, url: "https://x", body: "{}", messageID: "m", traceparent: traceparent, tracestate: tracestate)
                .traceHeaders
        }
        #expect(headers(Self.valid, "rojo=1") == ["traceparent": Self.valid, "tracestate": "rojo=1"])
        #expect(headers(Self.valid, nil) == ["traceparent": Self.valid])
        #expect(headers(Self.valid, "rojo=1\r\nX-Evil: 1") == ["traceparent": Self.valid])
        #expect(headers(Self.valid + "\r\nX-Evil: 1", "rojo=1").isEmpty)
        #expect(headers(nil, "rojo=1").isEmpty && headers(nil, nil).isEmpty)
        #expect(headers(Self.valid, " , ") == ["traceparent": Self.valid], "an empty list is not sent")
    }
}
