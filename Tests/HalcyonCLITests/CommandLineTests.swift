import Foundation
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// Out-of-range values are errors that name what was wrong, never a trap: each of these used to
/// crash the CLI (an Int conversion of 1e20, of 10¹⁹ ms) or make a worker busy-loop.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (binary)"), .processes)
struct CommandLineTests {
    /// Runs halcyon with `arguments` against a database that does not exist (none of these may
    /// get that far); returns the exit status and what it printed.
    func run(_ arguments: [String]) async throws -> (status: Int32?, output: String) {
        let p = try HalcyonProcess(arguments + ["--database-url", "host=/nonexistent-halcyon-socket-dir"], conninfo: nil)
        return (await p.wait(timeout: 30), p.output)
    }

    @Test(
        arguments: [
            (["work", "--lease", "1e16s"], "--lease"),
            (["work", "--fetch-timeout", "10000000000000000s"], "--fetch-timeout"),
            (["work", "--poll-interval", "0"], "--poll-interval"),
            (["work", "--connect-timeout", "1e300s"], "--connect-timeout"),
            (["work", "--grace", "-1s"], "--grace"),
            (["work", "--max-download-size", "99999999TB"], "--max-download-size"),
            (["work", "--max-pixels", "1e12"], "--max-pixels"),
            (["work", "--statement-timeout", "0"], "--statement-timeout"),
            (["work", "--fetch-retry-backoff", "sometimes"], "--fetch-retry-backoff"),
            (["work", "--concurrency", "0"], "--concurrency"),
            (["work", "--mmap-threshold", "64MiB"], "--mmap-threshold"),
            (["dashboard", "--page-size", "0"], "--page-size"),
            (["dashboard", "--address", "10.0.0.1"], "--auth-token"),
            (["prune", "--older-than", "1e300s"], "--older-than"),
            (["status", "--interval", "0"], "--interval"),
            (["sweep", "--store-size-limit", "0"], "--store-size-limit"),
            (["enqueue", "https://example.com/a.jpg", "--max-attempts", "99999999999"], "max_attempts"),
            (["enqueue", "https://example.com/a.jpg", "--queue", "no spaces"], "queue name"),
            (["enqueue", "https://example.com/a.jpg", "--tag", ""], "tag"),
            (["enqueue", "https://example.com/a.jpg", "--traceparent", "00-abc"], "--traceparent must be a W3C traceparent"),
            (["enqueue", "https://example.com/a.jpg", "--tracestate", "a=1"], "--tracestate needs a traceparent"),
            (["enqueue", "--file", "-", "--traceparent", "00-abc"], "--file takes every field"),
            (["work", "--queue", "backfill=0"], "--queue"),
            (["work", "--queue", "a b"], "--queue"),
            (["work", "--retain-usage", "1h"], "--retain-usage"),
            (["work", "--retain-usage", "4000d"], "--retain-usage"),
            (["usage", "--since", "0"], "--since"),
            (["usage", "--since", "3651d"], "--since"),
            (["usage", "--since", "yesterday"], "--since"),
            (["usage", "--since", "2999-01-01T00:00:00Z"], "future"),
            (["usage", "--by", "tenant"], "--by"),
            (["usage", "--queue", "a b"], "--queue"),
            (["usage", "--limit", "0"], "--limit"),
            (["usage", "--limit", "100001"], "--limit"),
            (["usage", "--offset", "-1"], "--offset"),
            (["usage", "--sort", "name"], "--sort"),
            (["usage", "--fair-key", String(repeating: "k", count: 201)], "--fair-key"),
            (["work", "--per-host-concurrency", "0"], "--per-host-concurrency"),
            (["work", "--webhook-attempts", "0"], "--webhook-attempts"),
            (["work", "--webhook-secret", "whsec_not base64!"], "whsec_"),
            (["work", "--retain-succeeded", "1s"], "--retain-succeeded"),
            (["similar"], "give a job id or --hash"),
            (["similar", "1", "--hash", String(repeating: "a", count: 64)], "give a job id or --hash"),
            (["similar", "--hash", "abc"], "--hash must be 64 hex digits"),
            (["similar", "1", "--max-distance", "257"], "--max-distance"),
            (["similar", "1", "--limit", "0"], "--limit"),
            (["similar", "--hash", String(repeating: "a", count: 64), "--dihedral"], "--dihedral needs a job id"),
            (["work", "--retain-failed", "1d", "--sweep-interval", "0"], "--sweep-interval"),
            (["wait", "1", "--timeout", "1e300s"], "--timeout"),
            (["retry"], "filter"),
            (["cancel", "1", "--queue", "q"], "not both"),
        ] as [([String], String)])
    func anOutOfRangeOptionIsAnErrorNamingIt(arguments: [String], option: String) async throws {
        let (status, output) = try await run(arguments)
        #expect(status == 64 || status == 1, "\(arguments): exit \(status.map(String.init) ?? "none"): \(output)")
        #expect(output.contains(option), "\(arguments): \(output)")
        #expect(!output.contains("Fatal error"), "\(arguments): \(output)")
    }

    /// ArgumentParser wraps help text to the terminal: text hard-wrapped in the source comes out
    /// as a long line and a stub. Within a paragraph (lines of equal indentation), every line but
    /// the last must be a real line, not a fragment of a few words.
    @Test(
        arguments: [
            [], ["work"], ["enqueue"], ["bench"], ["demo"], ["sweep"], ["verify"], ["status"], ["prune"], ["show"], ["wait"], ["retry"],
            ["cancel"], ["pause"], ["dashboard"], ["usage"],
        ])
    func helpTextIsWrappedByArgumentParserNotByHand(command: [String]) async throws {
        let p = try HalcyonProcess(command + ["--help"], conninfo: nil)
        #expect(await p.wait(timeout: 30) == 0)
        let lines = p.output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.count > 5, "\(command): \(p.output)")
        func indent(_ line: String) -> Int { line.prefix { $0 == " " }.count }
        for (line, next) in zip(lines, lines.dropFirst()) {
            let text = line.trimmingCharacters(in: .whitespaces)
            let continues =
                !next.trimmingCharacters(in: .whitespaces).isEmpty && indent(next) == indent(line)
                && !next.trimmingCharacters(in: .whitespaces).hasPrefix("-") && !text.hasSuffix(":")
            #expect(!(continues && !text.isEmpty && text.count < 20), "\(command) --help has a fragment line: '\(line)' then '\(next)'")
        }
    }

    @Test func aJSONLineWithAnOutOfRangeNumberIsRejectedByLine() async throws {
        let file = try TestEnvironment.temporaryDirectory("cli").appendingPathComponent("jobs.jsonl")
        for (line, message) in [
            (#"{"source":"https://x/a.jpg","priority":1e20}"#, #"line 2: "priority" must be an integer from -32768 to 32767"#),
            (#"{"source":"https://x/a.jpg","max_attempts":1e300}"#, #"line 2: "max_attempts" must be an integer from 1 to"#),
            (#"{"source":"https://x/a.jpg","traceparent":"00-abc"}"#, #"line 2: traceparent must be a W3C traceparent"#),
            (#"{"source":"https://x/a.jpg","traceparent":7}"#, #"line 2: "traceparent" must be a string"#),
        ] {
            try (#"{"source":"https://x/ok.jpg"}"# + "\n" + line + "\n").write(to: file, atomically: true, encoding: .utf8)
            let (status, output) = try await run(["enqueue", "--file", file.path])
            #expect(status == 1, "exit \(status.map(String.init) ?? "none"): \(output)")
            #expect(output.contains(message), "\(output)")
        }
    }
}

/// `halcyon similar` on rows holding hashes: by a job's hash (itself left out), by a hash, as
/// JSON; a job without a hash is an error that says how to get one.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, binary)"), .processes)
struct SimilarCommandTests {
    @Test func similarListsNearDuplicatesNearestFirst() async throws {
        let db = try await TestDatabase.create()
        let a = String(repeating: "0f", count: 32), near = "1f" + String(repeating: "0f", count: 31), far = String(repeating: "f0", count: 32)
        try await db.query(
            """
            INSERT INTO halcyon.jobs (source, source_pdq, source_pdq_quality) VALUES
              ('https://example.com/a.jpg', $1, 100), ('https://example.com/near.jpg', $2, 90), ('https://example.com/far.jpg', $3, 80),
              ('https://example.com/none.jpg', NULL, NULL)
            """, [a, near, far])
        let text = try HalcyonProcess(["similar", "1"], conninfo: db.conninfo)
        #expect(await text.wait(timeout: 60) == 0, "\(text.output)")
        let lines = text.output.split(separator: "\n").filter { $0.first?.isNumber == true }
        #expect(lines.count == 1 && lines[0].hasPrefix("2 ") && lines[0].contains(" 1 ") && lines[0].contains("near.jpg"), "\(text.output)")
        let json = try HalcyonProcess(["similar", "--hash", a.uppercased(), "--max-distance", "256", "--json"], conninfo: db.conninfo)
        #expect(await json.wait(timeout: 60) == 0, "\(json.output)")
        let ids = JSONValue.parse(json.output)?.arrayValue?.compactMap { $0["id"]?.numberValue.map { Int($0) } }
        #expect(ids == [1, 2, 3], "nearest first, every hashed job within 256 bits: \(json.output)")
        let none = try HalcyonProcess(["similar", "4"], conninfo: db.conninfo)
        #expect(await none.wait(timeout: 60) == 1 && none.output.contains("no perceptual hash"), "\(none.output)")
    }
}

/// A job's trace context from `halcyon enqueue` (an option, a JSON line) to `show`.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, binary)"), .processes)
struct TraceContextCommandTests {
    @Test func enqueueCarriesTheTraceContextAndShowPrintsIt() async throws {
        let db = try await TestDatabase.create()
        let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        let enqueue = try HalcyonProcess(
            ["enqueue", "https://example.com/a.jpg", "--traceparent", parent, "--tracestate", "congo=t61rcWkgMzE"], conninfo: db.conninfo)
        #expect(await enqueue.wait(timeout: 60) == 0, "\(enqueue.output)")
        let id = try #require(enqueue.output.split(separator: "\n").last.map(String.init))
        let show = try HalcyonProcess(["show", id, "--json"], conninfo: db.conninfo)
        #expect(await show.wait(timeout: 60) == 0, "\(show.output)")
        let object = JSONValue.parse(show.output)
        #expect(object?["traceparent"]?.stringValue == parent && object?["tracestate"]?.stringValue == "congo=t61rcWkgMzE", "\(show.output)")
        let text = try HalcyonProcess(["show", id], conninfo: db.conninfo)
        #expect(await text.wait(timeout: 60) == 0 && text.output.contains("traceparent         \(parent)"), "\(text.output)")
        // From a JSON line, with no tracestate.
        let file = try TestEnvironment.temporaryDirectory("cli").appendingPathComponent("traced.jsonl")
        try #"{"source":"https://x/b.jpg","traceparent":"\#(parent)"}"#.write(to: file, atomically: true, encoding: .utf8)
        let lines = try HalcyonProcess(["enqueue", "--file", file.path], conninfo: db.conninfo)
        #expect(await lines.wait(timeout: 60) == 0, "\(lines.output)")
        let rows = try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE traceparent = $1", [parent])
        #expect(rows.value(0, "n") == "2")
    }
}

/// `show` and `status` print rows anyone with write access could make, without trapping.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, binary)"), .processes)
struct HostileRowCommandTests {
    @Test func showAndStatusPrintHugeNumbers() async throws {
        let db = try await TestDatabase.create()
        // A row no worker writes (its measures' constraints dropped): read back bounded.
        try await db.query("ALTER TABLE halcyon.jobs DROP CONSTRAINT jobs_result_quality_range, DROP CONSTRAINT jobs_result_score_range")
        let r = try await db.query(
            """
            INSERT INTO halcyon.jobs (source, state, attempt, finished_at, last_error, errors, timings, result_quality, result_score)
            VALUES ('https://example.com/huge.jpg', 'failed', 1, now(), 'fetch.timeout: slow',
                    '[{"at": "2026-11-25T00:00:00Z", "attempt": 1e300, "code": "fetch.timeout", "message": "slow"}]',
                    '{"total_ms": 1e300, "fetch_ms": -1e300}', 32767, 'NaN')
            RETURNING id
            """)
        try await db.query(
            """
            INSERT INTO halcyon.store_sweeps (swept_by, store_root, kept_files, kept_bytes, size_limit, removed_files, removed_keys, freed_bytes, seconds)
            VALUES ('someone', '/nowhere', 1, 9223372036854775807, 0, 0, 0, 0, 1e300)
            """)
        let show = try HalcyonProcess(["show", r.value(0, "id") ?? ""], conninfo: db.conninfo)
        #expect(await show.wait(timeout: 60) == 0, "\(show.output)")
        #expect(show.output.contains("fetch.timeout"), "\(show.output)")
        #expect(!show.output.contains("result_quality") && !show.output.contains("NaN"), "\(show.output)")
        let json = try HalcyonProcess(["show", r.value(0, "id") ?? "", "--json"], conninfo: db.conninfo)
        #expect(await json.wait(timeout: 60) == 0, "\(json.output)")
        let shown = JSONValue.parse(json.output)
        #expect(shown?["result_quality"] == .null && shown?["result_score"] == .null, "\(json.output)")
        let status = try HalcyonProcess(["status"], conninfo: db.conninfo)
        #expect(await status.wait(timeout: 60) == 0, "\(status.output)")
        #expect(status.output.contains("STORE"), "\(status.output)")
    }
}

/// `halcyon usage` prints a page: the rows in the order asked, the others' sum, the total and
/// where the next page starts; `--json` the same with `total_rows`, `more` and `next_offset`.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, binary)"), .processes)
struct UsageCommandTests {
    @Test func usagePrintsAPageTheOthersAndTheTotal() async throws {
        let db = try await TestDatabase.create()
        try await db.query(
            """
            INSERT INTO halcyon.usage (queue, fair_key, hour, succeeded, decode_cpu_ms, bytes_fetched)
            SELECT 'thumbs', 'user-' || k, date_trunc('hour', now()), k, 10 * k, 1000
            FROM generate_series(1, 30) k
            """)
        let text = try HalcyonProcess(["usage", "--by", "fair-key", "--sort", "cpu", "--limit", "3"], conninfo: db.conninfo)
        #expect(await text.wait(timeout: 60) == 0, "\(text.output)")
        let lines = text.output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let rows = lines.filter { $0.hasPrefix("thumbs") }
        #expect(rows.map { $0.split(separator: " ", omittingEmptySubsequences: true)[1] } == ["user-30", "user-29", "user-28"], "\(text.output)")
        #expect(lines.contains { $0.hasPrefix("others (27 rows)") && $0.contains(" \((1...27).reduce(0, +)) ") }, "\(text.output)")
        #expect(lines.contains { $0.hasPrefix("total") && $0.contains(" 465 ") }, "\(text.output)")
        #expect(lines.last == "rows 1–3 of 30; the next page: --offset 3", "\(text.output)")

        let json = try HalcyonProcess(
            ["usage", "--fair-key", "user-7", "--json"], conninfo: db.conninfo)
        #expect(await json.wait(timeout: 60) == 0, "\(json.output)")
        let page = JSONValue.parse(json.output)
        #expect(page?["total_rows"]?.numberValue == 1 && page?["more"]?.boolValue == false && page?["next_offset"] == .null, "\(json.output)")
        #expect(page?["rows"]?.arrayValue?.first?["fair_key"]?.stringValue == "user-7" && page?["by"]?.stringValue == "fair-key")
        #expect(page?["total"]?["succeeded"]?.numberValue == 7 && page?["others"]?["rows"]?.numberValue == 0, "\(json.output)")
    }
}
