import Foundation
import HalcyonQueue
import HalcyonRuntime
import HalcyonSamples
import HalcyonTestSupport
import Testing

/// Presets and `halcyon.enqueue_variants`: the srcset case, end to end through the CLI, SQL
/// and a worker.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct PresetTests {
    func halcyon(_ db: TestDatabase, _ arguments: [String]) async throws -> (status: Int32?, output: String) {
        let p = try HalcyonProcess(arguments, conninfo: db.conninfo)
        let status = await p.wait(timeout: 60)
        return (status, p.output)
    }

    func drain(_ db: TestDatabase, _ store: URL) async throws {
        let w = try TestWorker(
            ["work", "--store", store.path, "--log-level", "info", "--allow-network", "127.0.0.1/32", "--drain"], conninfo: db.conninfo)
        #expect(await w.wait(timeout: 180) == 0, "\(w.output.suffix(3000))")
    }

    @Test func aSrcsetOfPresetsIsOneStatementOneDownloadOneDecode() async throws {
        try Origin.publish("preset.jpg", try SampleImages.photo(width: 1600, height: 1200, seed: 12))
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let url = "\(TestEnvironment.origin)/files/preset.jpg?t=\(db.name)"
        for (name, chain, options) in [
            ("thumb", "resize(64x64, mode=fill) |> format(png)", "{}"),
            ("card", "resize(320x240, mode=fill, gravity=attention) |> format(webp, quality=80)", "{}"),
            ("hero", "resize(1024x1024) |> format(jpeg, quality=85)", #"{"placeholders": ["blurhash"], "expiration": "1d"}"#),
        ] {
            let r = try await halcyon(db, ["preset", "set", name, chain, "--options", options])
            #expect(r.status == 0 && r.output.contains("created preset \(name)"), "\(r.output)")
        }
        let list = try await halcyon(db, ["preset", "list"])
        #expect(list.output.contains("card  resize(320x240,mode=fill,gravity=attention)|>format(webp,quality=80)"), "\(list.output)")

        let ids = try await db.query(
            "SELECT halcyon.enqueue_variants($1, ARRAY['thumb', 'card', 'hero'], options => '{\"placeholders\": [\"dominant_color\"]}') AS ids",
            [url])
        let idList = PGRows.parseTextArray(try #require(ids.value(0, "ids")))
        #expect(idList.count == 3)
        try await drain(db, store)
        let rows = try await db.query(
            """
            SELECT id, state::text, processors, result_key, result_format || ' ' || result_width || 'x' || result_height AS got,
                   timings ->> 'decode_ms' AS decode, placeholders::text AS placeholders
            FROM halcyon.jobs WHERE id = ANY($1::bigint[]) ORDER BY id
            """, ["{" + idList.joined(separator: ",") + "}"])
        #expect(rows.dictionaries.map { $0["got"] ?? nil } == ["png 64x64", "webp 320x240", "jpeg 1024x768"], "\(rows.dictionaries)")
        #expect(rows.dictionaries.allSatisfy { $0["state"] == "succeeded" })
        #expect(rows.value(0, "processors") == "preset(thumb)")
        // The result key is the expanded chain's.
        #expect(rows.value(1, "result_key") == url + "@resize(320x240,mode=fill,gravity=attention)|>format(webp,quality=80)")
        // One download, one decode (the decode time is the shared one), …
        #expect(try Origin.counts().filter { $0.key.contains("t=\(db.name)") }.values.first == 1)
        #expect(Set(rows.dictionaries.compactMap { $0["decode"] ?? nil }).count == 1, "\(rows.dictionaries)")
        // … and the job's own options win key by key over the preset's.
        let hero = try #require(JSONValue.parse(rows.value(2, "placeholders") ?? ""))
        #expect(hero["dominant_color"] != nil && hero["blurhash"] == nil)

        // A changed preset never serves the old result.
        #expect(try await halcyon(db, ["preset", "set", "thumb", "resize(32x32, mode=fill) |> format(png)"]).output.contains("replaced"))
        // (The CLI enqueues preset chains too.)
        let again = try await halcyon(db, ["enqueue", url, "--processors", "preset(thumb)"])
        #expect(again.status == 0, "\(again.output)")
        try await drain(db, store)
        let r = try await db.query(
            "SELECT cache_hit, result_width FROM halcyon.jobs WHERE id = $1::bigint", [again.output.trimmingCharacters(in: .whitespacesAndNewlines)])
        #expect(r.value(0, "cache_hit") == "f" && r.value(0, "result_width") == "32")
    }

    /// `validate` checks a chain's presets against the database's, and says so when it cannot.
    @Test func validateLooksPresetsUp() async throws {
        let db = try await TestDatabase.create()
        #expect(try await halcyon(db, ["preset", "set", "small", "resize(10x10)"]).status == 0)
        let ok = try await halcyon(db, ["validate", "preset(small) |> format(png)"])
        #expect(ok.status == 0 && ok.output.hasPrefix("resize(10x10,mode=fit)|>format(png"), "\(ok.output)")
        let unknown = try await halcyon(db, ["validate", "preset(nope)"])
        #expect(unknown.status == 1 && unknown.output.contains("unknown preset 'nope'"), "\(unknown.output)")
        // Without presets no database is needed; with them and no database, the error says why.
        let plain = try HalcyonProcess(["validate", "flip"], conninfo: "host=/nonexistent-halcyon connect_timeout=2")
        #expect(await plain.wait(timeout: 30) == 0, "\(plain.output)")
        let away = try HalcyonProcess(["validate", "preset(small)"], conninfo: "host=/nonexistent-halcyon connect_timeout=2")
        #expect(await away.wait(timeout: 60) == 1)
        #expect(away.output.contains("which are read from the database, and it could not be read"), "\(away.output)")
    }

    @Test func missingPresetsAndBadDefinitionsAreClearErrors() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let url = "\(TestEnvironment.origin)/files/preset.jpg?t=\(db.name)-missing"
        #expect(try await halcyon(db, ["preset", "set", "small", "resize(10x10)"]).status == 0)
        // enqueue_variants refuses the whole call, for the unknown name (the known one is not enqueued).
        await #expect {
            try await db.query("SELECT halcyon.enqueue_variants($1, ARRAY['small', 'nope'])", [url])
        } throws: { "\($0)".contains("no preset named 'nope'") }
        await #expect {
            try await db.query("SELECT halcyon.enqueue_variants($1, ARRAY['nope'])", [url])
        } throws: { "\($0)".contains("no preset named 'nope'") }
        // A NULL among the names is refused too (it used to enqueue an empty, pass-through chain).
        await #expect {
            try await db.query("SELECT halcyon.enqueue_variants($1, ARRAY['small', NULL])", [url])
        } throws: { ($0 as? DatabaseError)?.sqlState == "22004" && "\($0)".contains("preset 2 of the array is NULL") }
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.jobs").value(0, "n") == "0", "nothing enqueued")
        // A chain naming a preset that does not exist fails at the worker, before any download.
        let id = try #require(try await db.query("SELECT halcyon.enqueue($1, processors => 'preset(nope) |> blur(1)') AS id", [url]).value(0, "id"))
        try await drain(db, store)
        let r = try await db.query("SELECT state::text, last_error FROM halcyon.jobs WHERE id = $1::bigint", [id])
        #expect(r.value(0, "state") == "failed" && r.value(0, "last_error")?.contains("job.invalid_chain") == true)
        #expect(r.value(0, "last_error")?.contains("unknown preset 'nope'") == true, "\(r.value(0, "last_error") ?? "")")
        #expect(try Origin.counts().keys.allSatisfy { !$0.contains("t=\(db.name)-missing") })

        for (arguments, message) in [
            (["preset", "set", "Bad-Name", "resize(10x10)"], "is not a preset name"),
            (["preset", "set", "nested", "preset(small)"], "cannot use preset"),
            (["preset", "set", "broken", "resize(10x10"], "job.invalid_chain"),
            (["preset", "set", "hooked", "resize(10x10)", "--options", #"{"callback_url": "http://x/"}"#], "per job"),
            (["preset", "set", "typo", "resize(10x10)", "--options", #"{"placeholder": []}"#], "unknown option"),
            (["preset", "delete", "nope"], "no preset named 'nope'"),
        ] {
            let r = try await halcyon(db, arguments)
            #expect(r.status != 0 && r.output.contains(message), "\(arguments): \(r.output)")
        }
        #expect(try await halcyon(db, ["preset", "delete", "small"]).output.contains("deleted preset small"))
    }
}
