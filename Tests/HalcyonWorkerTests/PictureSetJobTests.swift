import Foundation
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import HalcyonStore
import HalcyonTestSupport
import Testing

/// Picture sets end to end through a worker: every rung stored, the manifest on the row with its
/// markup, a rerun all store hits, a rung served to a job asking for it alone, a set whose rung
/// was swept made again.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct PictureSetJobTests {
    let front = FrontEndTests()
    static let chain = "breakpoints(min_width=200,max_width=800,bytes_step=8000,max_images=4,formats=avif|webp|jpeg,min_score=70)"
    static let options = #"{"picture": {"sizes": "(max-width: 600px) 100vw, 600px", "base_url": "https://cdn.example.com/s/", "alt": "a \"fox\""}}"#

    func row(_ db: TestDatabase, _ id: String) async throws -> [String: String?] {
        try #require(
            try await db.query(
                """
                SELECT state::text, cache_hit, last_error, result_path, result_format, result_width, result_bytes, result_manifest::text AS manifest,
                       halcyon.finished_payload(id, state, queue, cache_hit, result_key, result_path, NULL, result_quality, result_score,
                                                jsonb_array_length(result_manifest -> 'rungs')) AS payload
                FROM halcyon.jobs WHERE id = $1::bigint
                """, [id]
            ).dictionaries.first)
    }

    @Test func aSetIsStoredRecordedAndServedAgainFromTheStore() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let fox = try Data(contentsOf: publicFixture("photos/fox.jpg"))
        try Origin.publish("set-fox.jpg", fox)
        let path = "/files/set-fox.jpg?t=\(db.name)"
        let url = TestEnvironment.origin + path
        // With a webhook: the delivery carries the manifest.
        let secret = "secret-\(db.name)"
        let hook = "\(TestEnvironment.origin)/webhook/\(db.name)/0?secret=\(secret)"
        let options = Self.options.replacingOccurrences(of: #"{"picture""#, with: #"{"callback_url": "\#(hook)", "picture""#)
        let first = try await front.enqueue(db, url, Self.chain, options)
        let w = try await front.worker(db, store: store, ["--webhook-secret", secret])
        #expect(await w.wait(timeout: 180) == 0, "\(w.output.suffix(3000))")

        let r = try await row(db, first)
        #expect(r["state"] == "succeeded", "\(r["last_error"] as Any)")
        let text = try #require(r["manifest"] ?? nil)
        let manifest = try #require(PictureManifest(jsonText: text))
        let json = try #require(JSONValue.parse(text))
        // Every rung is in the store, its bytes as the manifest says.
        for rung in manifest.rungs {
            let file = store.appendingPathComponent(rung.path)
            let size = (try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? -1
            #expect(size == rung.bytes, "\(rung.path)")
            #expect(ImageFormat.sniffOutput(try Data(contentsOf: file)) == rung.format)
        }
        #expect(manifest.formats == [.avif, .webp, .jpeg])
        for format in manifest.formats {
            let widths = manifest.rungs(format).map(\.width)
            #expect(zip(widths, widths.dropFirst()).allSatisfy { $0 < $1 } && widths.last == 800 && widths.count <= 4, "\(format): \(widths)")
            #expect(json["srcset"]?[format.rawValue]?.stringValue == manifest.srcset(format, baseURL: "https://cdn.example.com/s/"))
        }
        // result_* are the fallback's largest rung.
        let last = try #require(manifest.rungs.last)
        #expect(r["result_path"] == last.path && r["result_format"] == "jpeg" && r["result_width"] == "800" && r["result_bytes"] == "\(last.bytes)")
        let picture = try #require(json["picture"]?.stringValue)
        #expect(picture.hasPrefix("<picture><source type=\"image/avif\" srcset=\"https://cdn.example.com/s/objects/"))
        #expect(picture.contains("sizes=\"(max-width: 600px) 100vw, 600px\"") && picture.contains("alt=\"a &quot;fox&quot;\""))
        #expect(picture.contains("width=\"800\" height=\"532\""))
        #expect(json["sizes"]?.stringValue == "(max-width: 600px) 100vw, 600px")
        #expect((r["payload"] ?? nil)?.contains("\"rungs\": \(manifest.rungs.count)") == true, "\(r["payload"] as Any)")
        let deliveries = JSONValue.parse(try Origin.get("\(TestEnvironment.origin)/_webhooks/\(db.name)"))?.arrayValue ?? []
        let body = deliveries.last?["body"]?.stringValue.flatMap(JSONValue.parse)
        #expect(deliveries.count == 1 && body?["result"]?["manifest"]?["rungs"]?.arrayValue?.count == manifest.rungs.count, "\(deliveries)")
        #expect(body?["result"]?["manifest"]?["picture"]?.stringValue == picture)
        // `halcyon show`: a line per rung, then the markup; `--json` the manifest as it is.
        let show = try HalcyonProcess(["show", first], conninfo: db.conninfo)
        #expect(await show.wait(timeout: 60) == 0)
        #expect(show.output.contains("rungs               \(manifest.rungs.count) (avif, webp, jpeg)"), "\(show.output)")
        #expect(
            show.output.contains("  avif  \(manifest.rungs[0].width)x\(manifest.rungs[0].height)")
                && show.output.contains("picture             <picture>"))
        let showJSON = try HalcyonProcess(["show", first, "--json"], conninfo: db.conninfo)
        #expect(await showJSON.wait(timeout: 60) == 0)
        let shown = JSONValue.parse(showJSON.output)?["result_manifest"]?.jsonText ?? ""
        #expect(PictureManifest(jsonText: shown) == manifest, "\(showJSON.output.prefix(2000))")

        // Again: a hit, the same rungs, no download; the markup as this job asks; every rung's
        // expiry moved on by the hit (`extend` cache_time), not only the set's own object.
        func expiries() throws -> [Date] {
            try manifest.rungs.map {
                try #require(try FileManager.default.attributesOfItem(atPath: store.appendingPathComponent($0.path).path)[.modificationDate] as? Date)
            }
        }
        let expiresBefore = try expiries()
        try await Task.sleep(for: .milliseconds(1100))
        let again = try await front.enqueue(db, url, Self.chain, "{}")
        // One rung alone, as its own chain: a hit on what the set stored.
        let webp = try #require(manifest.rungs(.webp).first)
        let alone = try await front.enqueue(
            db, url, "resize(\(webp.width)x16384, mode=fit) |> format(webp, quality=auto, min_score=70)", "{}")
        try await front.drain(db, store)
        let hit = try await row(db, again)
        for (rung, (before, after)) in zip(manifest.rungs, zip(expiresBefore, try expiries())) {
            #expect(after > before, "\(rung.format) \(rung.width): its expiry \(before) → \(after)")
        }
        #expect(hit["cache_hit"] == "t" && hit["result_path"] == last.path)
        let hitText = try #require(hit["manifest"] ?? nil)
        #expect(PictureManifest(jsonText: hitText) == manifest)
        #expect(JSONValue.parse(hitText)?["sizes"]?.stringValue == "100vw")
        let single = try await row(db, alone)
        #expect(single["cache_hit"] == "t" && single["result_path"] == webp.path, "\(single)")
        #expect(try Origin.counts()[path] == 1, "one download for the three jobs")

        // A rung swept from the store: the set is made again, every rung back.
        let gone = try #require(manifest.rungs.first { $0.format == .avif })
        try FileManager.default.removeItem(at: store.appendingPathComponent(gone.path))
        let remade = try await front.enqueue(db, url, Self.chain, "{}")
        try await front.drain(db, store)
        let made = try await row(db, remade)
        #expect(made["state"] == "succeeded" && made["cache_hit"] == "f", "\(made)")
        let madeText = try #require(made["manifest"] ?? nil)
        let back = try #require(PictureManifest(jsonText: madeText))
        for rung in back.rungs { #expect(FileManager.default.fileExists(atPath: store.appendingPathComponent(rung.path).path), "\(rung.path)") }
        // Usage bills each set made for every image it stored; hits for nothing.
        let usage = try HalcyonProcess(["usage", "--json"], conninfo: db.conninfo)
        #expect(await usage.wait(timeout: 60) == 0)
        let billed = JSONValue.parse(usage.output)?["total"]?["bytes_stored"]?.numberValue
        #expect(billed == Double((manifest.rungs + back.rungs).map(\.bytes).reduce(0, +)), "\(usage.output.prefix(2000))")
    }

    @Test func aSetAskingTooMuchFailsWithItsReasonAndABystanderSucceeds() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let fox = try Data(contentsOf: publicFixture("photos/fox.jpg"))
        let url = try Origin.publish("set-costly.jpg", fox) + "?t=\(db.name)"
        let costly = try await front.enqueue(
            db, url, "breakpoints(min_width=16,max_width=800,bytes_step=1000,max_images=20,formats=avif|webp|jxl|jpeg)", "{}")
        let bystander = try await front.enqueue(db, url, "resize(100x100)", "{}")
        let w = try await front.worker(db, store: store, ["--max-job-time", "1s"])
        #expect(await w.wait(timeout: 180) == 0, "\(w.output.suffix(3000))")
        let failed = try await db.query(
            "SELECT state::text, errors -> -1 ->> 'code' AS code, last_error FROM halcyon.jobs WHERE id = $1::bigint", [costly])
        #expect(failed.value(0, "state") == "failed" && failed.value(0, "code") == "image.too_costly", "\(failed.dictionaries)")
        #expect(failed.value(0, "last_error")?.contains("lower max_images") == true, "\(failed.value(0, "last_error") ?? "")")
        #expect(try await row(db, bystander)["state"] == "succeeded")
    }
}
