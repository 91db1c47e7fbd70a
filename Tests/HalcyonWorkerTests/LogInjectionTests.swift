import Foundation
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// What a job holds cannot forge a log line: sources and cache keys with line breaks, carriage
/// returns, line separators, ANSI escapes and a whole forged event stay inside their own line,
/// escaped in the text format and as JSON in the JSON format.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct LogInjectionTests {
    let helper = WorkerTests()
    static let forged = "\n2026-11-27T12:00:00Z CRITICAL forged event=1"
    static let hostileKey = "key\r\u{2028}\u{1B}[31mred\u{1B}[0m\u{202E}txt.exe\(forged)"

    /// The output's lines, split at line feeds only (a `\r\n` is one Swift `Character`).
    static func lines(_ output: String) -> [String] {
        output.utf8.split(separator: UInt8(ascii: "\n")).map { String(decoding: $0, as: UTF8.self) }
    }

    @Test(arguments: ["text", "json"])
    func hostileJobTextStaysInItsEvent(format: String) async throws {
        _ = try WorkerTests.published()
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let o = TestEnvironment.origin
        var keyed = helper.job("\(o)/files/tiny.png?t=\(db.name)&k=1", "resize(4x4)")
        keyed.cacheKey = Self.hostileKey
        let ids = try await helper.enqueue(
            db,
            [
                // Succeeds: its key (the source) is logged at debug.
                helper.job("\(o)/files/tiny.png?t=\(db.name)&x=\(Self.forged)", "resize(4x4)"),
                // Succeeds: its cache key is logged at debug.
                keyed,
                // Fails for good (no --file-root): its source is logged at notice.
                helper.job("file:///nothing\(Self.forged)\u{1B}]0;title\u{7}", maxAttempts: 1),
            ])
        let w = try await helper.worker(
            db, store: store, ["--drain", "--no-progress", "--fetch-retries", "0", "--log-level", "debug", "--log-format", format])
        #expect(await w.wait(timeout: 180) == 0, "\(w.output.suffix(2000))")
        let states = try await db.query("SELECT state::text FROM halcyon.jobs ORDER BY id").rows.map { $0[0] ?? "" }
        #expect(states == ["succeeded", "succeeded", "failed"], "\(ids)")

        let output = w.output
        let lines = Self.lines(output)
        #expect(!lines.isEmpty)
        // No event starts where a job's text put a line break.
        #expect(!lines.contains { $0.hasPrefix("2026-11-27T12:00:00Z CRITICAL") }, "a forged line: \(output)")
        switch format {
        case "text":
            let event = #/^\d{4}-\d{2}-\d{2}T[0-9:.]+Z (TRACE|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL) /#
            for line in lines { #expect(line.firstMatch(of: event) != nil, "not an event of its own: \(line)") }
            #expect(
                !output.unicodeScalars.contains {
                    ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value) || [0x2028, 0x2029, 0x202E].contains($0.value)
                })
            let escaped = #"\n2026-11-27T12:00:00Z CRITICAL forged event=1"#
            #expect(lines.filter { $0.contains(escaped) }.count >= 3, "\(output)")
            #expect(
                lines.contains {
                    $0.contains(#"job succeeded"#) && $0.contains(#"key\r\u2028\u001b[31mred\u001b[0m\u202etxt.exe\n2026-11-27T12:00:00Z"#)
                })
            #expect(
                lines.contains {
                    $0.contains("NOTICE job failed")
                        && $0.contains(#"source=file:///nothing\n2026-11-27T12:00:00Z CRITICAL forged event=1\u001b]0;title\u0007"#)
                })
        default:
            var values: [String] = []
            for line in lines {
                guard case .object(let object)? = JSONValue.parse(line) else {
                    Issue.record("not a JSON object: \(line)")
                    continue
                }
                values += object.values.compactMap(\.stringValue)
            }
            #expect(values.filter { $0.contains(Self.forged) }.count >= 3, "\(output)")
            #expect(values.contains { $0.hasPrefix(Self.hostileKey + "@") }, "\(output)")
        }
    }

    /// libpq's messages span lines (a hint under each host tried): an error is printed on one.
    @Test func aDatabaseErrorIsOneLine() async throws {
        let p = try HalcyonProcess(["status"], conninfo: "host=127.0.0.1,127.0.0.1 port=1,2 connect_timeout=5")
        #expect(await p.wait(timeout: 60) != 0)
        let lines = Self.lines(p.output)
        #expect(lines.count == 1, "\(p.output)")
        #expect(lines.first?.hasPrefix("Error: cannot connect to the database --database-url names") == true, "\(p.output)")
        #expect(p.output.contains("connection to server at \"127.0.0.1\", port 1 failed"), "\(p.output)")
        #expect(p.output.contains("Is the server running") && p.output.contains("port 2 failed"), "\(p.output)")
    }
}
