import Foundation
import HalcyonDomain
import HalcyonImage
import HalcyonQueue
import HalcyonRuntime
import HalcyonSamples
import HalcyonStore
import HalcyonTestSupport
import Testing

/// What a front-end needs on the row, end to end through a worker: the source's facts,
/// placeholders, and results that keep them when served from the store.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct FrontEndTests {
    static let camera: Data = SampleEXIF().inserted(into: try! SampleImages.photo(width: 640, height: 480, seed: 4))

    /// A draining worker on `db`, once it is ready.
    func worker(_ db: TestDatabase, store: URL, _ extra: [String] = []) async throws -> TestWorker {
        let w = try TestWorker(WorkerTests.workArguments(store: store) + ["--drain"] + extra, conninfo: db.conninfo)
        try await w.ready()
        return w
    }

    func drain(_ db: TestDatabase, _ store: URL) async throws {
        let w = try await worker(db, store: store)
        #expect(await w.wait(timeout: 180) == 0, "\(w.output.suffix(3000))")
    }

    func row(_ db: TestDatabase, _ id: String) async throws -> [String: String?] {
        let r = try await db.query(
            """
            SELECT state::text, cache_hit, source_width, source_height, source_format, source_bytes, source_meta::text AS meta,
                   placeholders::text AS placeholders, last_error
            FROM halcyon.jobs WHERE id = $1::bigint
            """, [id])
        return try #require(r.dictionaries.first)
    }

    /// A JSON column of `row`, which must be there.
    func json(_ row: [String: String?], _ column: String) throws -> JSONValue {
        let text = try #require(row[column] ?? nil, "\(column) is NULL")
        return try #require(JSONValue.parse(text))
    }

    func enqueue(_ db: TestDatabase, _ source: String, _ chain: String, _ options: String) async throws -> String {
        try #require(
            try await db.query("SELECT halcyon.enqueue($1, processors => $2, options => $3::jsonb) AS id", [source, chain, options]).value(0, "id"))
    }

    /// `quality=auto` and `format(auto)` end to end: the row records the quality chosen and the
    /// score reached (the stored bytes' own, scored again here), whether it missed its target, a
    /// store hit reports the same, and option `score` scores a fixed quality.
    @Test func perceptualResultsRecordTheirQualityAndScore() async throws {
        try Origin.publish("camera.jpg", Self.camera)
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let url = "\(TestEnvironment.origin)/files/camera.jpg?t=\(db.name)"
        let chains = [
            "resize(320x320) |> format(jpeg, quality=auto, min_score=80)", "resize(320x320) |> format(auto, min_score=75)",
            "resize(320x320) |> format(jpeg, quality=82)",
            // A max_bytes no quality reaching the score fits in: the best that fits, its target missed.
            "resize(320x320) |> format(jpeg, quality=auto, min_score=90, max_bytes=4000)",
        ]
        var ids: [String] = []
        for (i, chain) in chains.enumerated() {
            // A source each: decoded for its chain alone, as the reference below is.
            ids.append(try await enqueue(db, url + "&c=\(i)", chain, i == 2 ? #"{"score": true}"# : "{}"))
        }
        try await drain(db, store)
        func measures(
            _ id: String
        ) async throws -> (
            quality: Int?, score: Double?, hit: String?, path: String?, missed: String?, chroma: String?, format: String?, exact: String?
        ) {
            let r = try await db.query(
                """
                SELECT result_quality, result_score, cache_hit, result_path, result_target_missed, result_chroma, result_format,
                       result_quality_exact, state::text, last_error
                FROM halcyon.jobs WHERE id = $1::bigint
                """, [id])
            #expect(r.value(0, "state") == "succeeded", "\(r.value(0, "last_error") ?? "")")
            return (
                r.value(0, "result_quality").flatMap { Int($0) }, r.value(0, "result_score").flatMap { Double($0) }, r.value(0, "cache_hit"),
                r.value(0, "result_path"), r.value(0, "result_target_missed"), r.value(0, "result_chroma"), r.value(0, "result_format"),
                r.value(0, "result_quality_exact")
            )
        }
        let reference = try SSIMULACRA2Reference(
            MagickImage.decode(
                try ImagePipeline.run(Self.camera, format: .jpeg, chain: ProcessorChain.parse("resize(320x320) |> format(png)")).data, format: .png))
        for (id, target) in zip(ids, [80.0, 75.0, 0]) {
            let m = try await measures(id)
            let score = try #require(m.score, "job \(id) has no score")
            #expect(score >= target && m.quality != nil, "job \(id): \(score) at \(m.quality ?? 0)")
            #expect(m.missed == (target > 0 ? "f" : nil), "job \(id): result_target_missed \(m.missed ?? "NULL")")
            let bytes = try #require(FileManager.default.contents(atPath: store.appendingPathComponent(m.path ?? "").path))
            let format = try #require(ImageFormat.sniff(bytes))
            #expect(abs(try reference.score(encoded: bytes, format: format) - score) < 0.01, "the row's score is the stored bytes' own")
            // A JPEG's sampling as its bytes say; none for other formats.
            #expect(m.chroma == (format == .jpeg ? DeclaredSize.jpegChroma(bytes)?.rawValue : nil) && (m.format != "jpeg" || m.chroma != nil))
            // The exact quality: the whole one, or it and a half.
            let exact = try #require(m.exact.flatMap(Double.init), "job \(id): no result_quality_exact")
            #expect([Double(m.quality ?? 0), Double(m.quality ?? 0) + 0.5].contains(exact), "job \(id): \(exact) for \(m.quality ?? 0)")
        }
        #expect(try await measures(ids[2]).quality == 82)
        let missed = try await measures(ids[3])
        #expect(missed.missed == "t" && (missed.score ?? 100) < 90, "\(missed)")
        // A hit reports what the stored result reached.
        let hit = try await enqueue(db, url + "&c=0", chains[0], "{}")
        try await drain(db, store)
        let first = try await measures(ids[0]), again = try await measures(hit)
        #expect(
            again.hit == "t" && again.quality == first.quality && again.score == first.score && again.missed == "f" && again.chroma == first.chroma
                && again.exact == first.exact)
        let missedAgain = try await enqueue(db, url + "&c=3", chains[3], "{}")
        try await drain(db, store)
        #expect(try await measures(missedAgain).missed == "t", "a hit of a result under its target says so too")
    }

    /// `perceptual_hash` end to end: each source's PDQ hash on its row; copies of a photograph
    /// (resized, re-encoded at quality 30, grey, captioned, cropped to 95 % of its area) found by
    /// `halcyon.similar_images` within 31 bits, its turned and mirrored copies through its
    /// dihedral hashes (`similar_to_job`), unrelated photographs not; the output's hash with
    /// "output"; a store hit relays the hashes only to a job that asks for them.
    @Test func perceptualHashesFindNearDuplicates() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let fox = try Data(contentsOf: publicFixture("photos/fox.jpg"))
        func copy(_ chain: String) throws -> Data { try ImagePipeline.run(fox, format: .jpeg, chain: ProcessorChain.parse(chain)).data }
        // A caption over a corner, like a watermark.
        func captioned(_ jpeg: Data) throws -> Data {
            let frame = try MagickImage.decode(jpeg, format: .jpeg).firstFrameSamples8(for: "test")
            let rgb = SampleImages.captioned(frame.pixels, width: frame.width, height: frame.height)
            return try SampleImages.encode(pixels: rgb, width: frame.width, height: frame.height, alpha: false, format: .jpeg, quality: 90)
        }
        let copies: [(String, Data)] = [
            ("resized", try copy("resize(400x400) |> format(jpeg, quality=85)")), ("q30", try copy("format(jpeg, quality=30)")),
            ("grey", try copy("black_white |> format(jpeg, quality=90)")),
            ("watermarked", try captioned(fox)), ("cropped", try copy("crop(780x519) |> format(jpeg, quality=90)")),
            ("mirrored", try copy("flop |> format(jpeg, quality=90)")), ("rotated", try copy("rotate(90) |> format(jpeg, quality=90)")),
        ]
        let unrelated = ["tiger", "paris", "coffee"]
        var ids: [String: String] = [:]
        let tag = "?t=\(db.name)"
        ids["fox"] = try await enqueue(
            db, try Origin.publish("pdq-fox.jpg", fox) + tag, "resize(320x320) |> format(jpeg, quality=80)", #"{"perceptual_hash": "dihedral"}"#)
        for (name, data) in copies {
            ids[name] = try await enqueue(db, try Origin.publish("pdq-\(name).jpg", data) + tag, "resize(320x320)", #"{"perceptual_hash": true}"#)
        }
        for name in unrelated {
            let data = try Data(contentsOf: publicFixture("photos/\(name).jpg"))
            ids[name] = try await enqueue(db, try Origin.publish("pdq-\(name).jpg", data) + tag, "resize(320x320)", #"{"perceptual_hash": true}"#)
        }
        let output = try await enqueue(db, "\(TestEnvironment.origin)/files/pdq-fox.jpg\(tag)", "resize(200x200)", #"{"perceptual_hash": "output"}"#)
        try await drain(db, store)

        func id(_ name: String) throws -> String { try #require(ids[name], "\(name)") }
        func hash(_ id: String) async throws -> (hash: String?, quality: String?, result: String?, dihedral: String?) {
            let r = try await db.query(
                """
                SELECT source_pdq, source_pdq_quality, result_pdq, array_length(source_pdq_dihedral, 1) AS dihedral, state::text, last_error
                FROM halcyon.jobs WHERE id = $1::bigint
                """, [id])
            #expect(r.value(0, "state") == "succeeded", "\(r.value(0, "last_error") ?? "")")
            return (r.value(0, "source_pdq"), r.value(0, "source_pdq_quality"), r.value(0, "result_pdq"), r.value(0, "dihedral"))
        }
        let original = try await hash(try id("fox"))
        let foxHash = try #require(original.hash)
        #expect(foxHash.count == 64 && original.quality == "100" && original.dihedral == "7" && original.result == nil)
        // The same source decoded in this process gives the same hash (the worker's decode is the
        // shrink-on-load one for 320 px; within a few bits).
        let local = try #require(
            try ImagePipeline.run(fox, format: .jpeg, chains: [ProcessorChain.parse("resize(320x320)")], hashes: [.source])[0].get().sourceHash)
        #expect((PerceptualHash.distance(local.hex, foxHash) ?? 256) <= 10)

        let similar = try await db.query("SELECT job_id::text, distance FROM halcyon.similar_images($1)", [foxHash])
        let found = Dictionary(uniqueKeysWithValues: similar.rows.compactMap { r in r[0].flatMap { id in r[1].flatMap(Int.init).map { (id, $0) } } })
        for name in ["fox", "resized", "q30", "grey", "watermarked", "cropped"] {
            let job = try id(name)
            #expect((found[job] ?? 99) <= 31, "\(name) (job \(job)) is a near-duplicate: \(found[job].map(String.init) ?? "not found")")
        }
        for name in unrelated + ["mirrored", "rotated"] {
            let job = try id(name)
            #expect(found[job] == nil, "\(name) is not found by the original's hash alone")
        }
        // With the dihedral hashes, the turned and mirrored copies too.
        let turned = try await db.query(
            "SELECT job_id::text, distance, variant FROM halcyon.similar_to_job($1::bigint, 31, true)", [try id("fox")])
        let variants = Dictionary(uniqueKeysWithValues: turned.rows.compactMap { r in r[0].flatMap { job in r[2].map { (job, $0) } } })
        let (mirrored, rotated, me) = (try id("mirrored"), try id("rotated"), try id("fox"))
        #expect(variants[mirrored] == "flipy" && variants[rotated] == "rotate270", "\(variants)")
        #expect(variants[me] == nil, "the job itself is left out")
        for name in unrelated {
            let job = try id(name)
            #expect(variants[job] == nil, "\(name)")
        }

        // The output's hash: a resize of the same picture.
        let out = try await hash(output)
        let resultHash = try #require(out.result)
        #expect((PerceptualHash.distance(resultHash, foxHash) ?? 256) <= 31 && out.dihedral == nil)

        // A hit: the hashes to a job that asks, none to one that does not.
        let asking = try await enqueue(db, "\(TestEnvironment.origin)/files/pdq-fox.jpg\(tag)", "resize(200x200)", #"{"perceptual_hash": "output"}"#)
        let plain = try await enqueue(db, "\(TestEnvironment.origin)/files/pdq-fox.jpg\(tag)", "resize(200x200)", "{}")
        try await drain(db, store)
        let hit = try await hash(asking), none = try await hash(plain)
        #expect(hit.hash == out.hash && hit.result == out.result && none.hash == nil && none.result == nil)
        let hits = try await db.query("SELECT count(*) AS n FROM halcyon.jobs WHERE id IN ($1::bigint, $2::bigint) AND cache_hit", [asking, plain])
        #expect(hits.value(0, "n") == "2")
    }

    @Test func factsAndPlaceholdersAreRecordedAndServedFromTheStore() async throws {
        try Origin.publish("camera.jpg", Self.camera)
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let url = "\(TestEnvironment.origin)/files/camera.jpg?t=\(db.name)"
        let all = #"{"placeholders": ["blurhash", "thumbhash", "dominant_color"], "blurhash_components": [5, 4]}"#
        let first = try await enqueue(db, url, "resize(320x320, mode=fill)", all)
        let kept = try await enqueue(db, url, "resize(100x100)", #"{"keep_gps": true}"#)
        try await drain(db, store)

        let r = try await row(db, first)
        #expect(r["state"] == "succeeded")
        #expect(r["source_width"] == "640" && r["source_height"] == "480" && r["source_format"] == "jpeg")
        #expect(r["source_bytes"] == String(Self.camera.count))
        let meta = try json(r, "meta")
        #expect(meta["camera_make"] == "Halcyon Camera Co." && meta["camera_model"] == "HX-1")
        #expect(meta["captured_at"] == "2024-05-01T12:30:45")
        #expect(meta["has_gps"] == .bool(true) && meta["gps"] == nil, "the position only with keep_gps")
        #expect(meta["orientation"] == 1 && meta["has_alpha"] == .bool(false) && meta["frames"] == 1)
        let placeholders = try json(r, "placeholders")
        let blurhash = try #require(placeholders["blurhash"]?.stringValue)
        #expect(Placeholders.blurhashComponents(blurhash).map { [$0.0, $0.1] } == [5, 4])
        #expect(Data(base64Encoded: placeholders["thumbhash"]?.stringValue ?? "") != nil)
        #expect(placeholders["dominant_color"]?.stringValue?.hasPrefix("#") == true)
        let k = try await row(db, kept)
        let keptMeta = try json(k, "meta")
        #expect(keptMeta["gps"]?["latitude"]?.numberValue.map { abs($0 - 48.856667) < 1e-4 } == true)
        #expect(k["placeholders"] == .some(nil))

        // A hit reports the same facts and placeholders without a download…
        let hit = try await enqueue(db, url, "resize(320x320, mode=fill)", #"{"placeholders": ["thumbhash"]}"#)
        // …but a stored result without a placeholder a job asks for is made again.
        let again = try await enqueue(db, url, "resize(100x100)", #"{"placeholders": ["dominant_color"]}"#)
        try await drain(db, store)
        let h = try await row(db, hit)
        #expect(h["cache_hit"] == "t")
        #expect(h["source_width"] == "640" && h["source_bytes"] == String(Self.camera.count))
        let hitPlaceholders = try json(h, "placeholders")
        #expect(hitPlaceholders == ["thumbhash": placeholders["thumbhash"]!], "only what the job asked for")
        let hitMeta = try json(h, "meta")
        #expect(hitMeta["camera_model"] == "HX-1" && hitMeta["gps"] == nil)
        let a = try await row(db, again)
        #expect(a["cache_hit"] == "f" && a["state"] == "succeeded")
        #expect(JSONValue.parse(a["placeholders"]! ?? "")?["dominant_color"] != nil)

        // `show` prints them.
        let show = try HalcyonProcess(["show", first], conninfo: db.conninfo)
        #expect(await show.wait(timeout: 60) == 0)
        #expect(show.output.contains("source_meta") && show.output.contains(blurhash))
        // A JPEG kept as JPEG, at the default quality; no score was asked for.
        let lines = show.output.split(separator: "\n").map { $0.split(separator: " ") }
        #expect(lines.contains(["result_quality", "85"]) && !lines.contains { $0.first == "result_score" }, "\(show.output)")
    }

    /// Smart crops and the new output steps through a worker, with the bad inputs each failing
    /// with its own code before (or without) wasted work.
    @Test func smartCropsAndOutputStepsRunThroughAWorker() async throws {
        try Origin.publish("camera.jpg", Self.camera)
        try Origin.publish("anim.gif", try SampleImages.animatedGIF(frames: 4))
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let photo = "\(TestEnvironment.origin)/files/camera.jpg?t=\(db.name)", gif = "\(TestEnvironment.origin)/files/anim.gif?t=\(db.name)"
        // A JPEG XL is written, not read: as a source it is an unsupported format.
        try Origin.publish("camera.jxl", try ImagePipeline.run(Self.camera, format: .jpeg, chain: ProcessorChain.parse("format(jxl, effort=1)")).data)
        let jxl = "\(TestEnvironment.origin)/files/camera.jxl?t=\(db.name)"
        let cases: [(source: String, chain: String, expect: String)] = [
            (photo, "resize(200x300, mode=fill, gravity=attention) |> format(png)", "png 200x300"),
            (photo, "crop(300x200, gravity=fp(0.8,0.2)) |> border(4, color=white) |> pad(320x320) |> format(png)", "png 320x320"),
            (photo, "trim |> round_corner(10%) |> format(webp, quality=90, max_bytes=9000)", "webp 640x480"),
            (gif, "resize(30x20) |> format(webp)", "webp 30x20"),
            (photo, "resize(100x100, mode=fill, gravity=middle)", "job.invalid_chain"),
            (photo, "crop(10x10, gravity=fp(2,0))", "job.invalid_chain"),
            (photo, "format(jpeg, quality=20, max_bytes=150)", "image.over_max_bytes"),
            (photo, "resize(200x200) |> format(jxl, quality=70, effort=3)", "jxl 200x150"),
            (photo, "format(jxl, lossless=true, effort=3)", "jxl 640x480"),
            (jxl, "resize(10x10)", "image.unsupported_format"),
        ]
        var ids: [String] = []
        for c in cases { ids.append(try await enqueue(db, c.source, c.chain, "{}")) }
        try await drain(db, store)
        for (id, c) in zip(ids, cases) {
            let r = try await db.query(
                """
                SELECT state::text, result_format || ' ' || result_width || 'x' || result_height AS got, result_bytes,
                       errors -> -1 ->> 'code' AS code
                FROM halcyon.jobs WHERE id = $1::bigint
                """, [id])
            if c.expect.contains(".") {
                #expect(r.value(0, "state") == "failed" && r.value(0, "code") == c.expect, "\(c.chain): \(r.dictionaries)")
            } else {
                #expect(r.value(0, "state") == "succeeded" && r.value(0, "got") == c.expect, "\(c.chain): \(r.dictionaries)")
            }
        }
        let webp = try await db.query("SELECT result_bytes FROM halcyon.jobs WHERE id = $1::bigint", [ids[2]])
        #expect(Int(webp.value(0, "result_bytes") ?? "") ?? .max <= 9000)
        // JPEG XL results are stored as .jxl; the recompressed JPEG records no quality.
        let jxlRows = try await db.query(
            "SELECT result_path, result_quality FROM halcyon.jobs WHERE id IN ($1::bigint, $2::bigint) ORDER BY id", [ids[7], ids[8]])
        for row in 0..<2 {
            let path = try #require(jxlRows.value(row, "result_path"))
            let stored = try #require(FileManager.default.contents(atPath: store.appendingPathComponent(path).path))
            #expect(path.hasSuffix(".jxl") && ImageFormat.sniffOutput(stored) == .jxl, "\(path)")
        }
        #expect(jxlRows.value(0, "result_quality") == "70" && jxlRows.value(1, "result_quality") == nil, "\(jxlRows.dictionaries)")
        let animated = try await db.query("SELECT result_path FROM halcyon.jobs WHERE id = $1::bigint", [ids[3]])
        let bytes = try #require(FileManager.default.contents(atPath: store.appendingPathComponent(animated.value(0, "result_path") ?? "").path))
        #expect(bytes.range(of: Data("ANMF".utf8)) != nil, "an animated WebP has ANMF frames")
        // The invalid chains failed before any download: only the good jobs fetched, once each source.
        let counts = try Origin.counts().filter { $0.key.contains("t=\(db.name)") }
        #expect(counts.values.allSatisfy { $0 == 1 }, "\(counts)")
    }

    /// Watermarks come through the worker's fetcher (one download for many jobs, decoded once);
    /// a watermark that cannot be had fails its job with its own fetch code.
    @Test func watermarksAreFetchedOnceAndTheirFailuresAreTheJobs() async throws {
        try Origin.publish("wm-photo.jpg", try SampleImages.photo(width: 400, height: 300, seed: 21))
        try Origin.publish("wm.png", try SampleImages.solid(width: 100, height: 50, red: 0, green: 0, blue: 250))
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let mark = "\(TestEnvironment.origin)/files/wm.png?t=\(db.name)"
        let chain = "watermark(\"\(mark)\", scale=0.25, opacity=1) |> format(png)"
        var good: [String] = []
        for i in 0..<3 { good.append(try await enqueue(db, "\(TestEnvironment.origin)/files/wm-photo.jpg?t=\(db.name)&i=\(i)", chain, "{}")) }
        let photo = "\(TestEnvironment.origin)/files/wm-photo.jpg?t=\(db.name)&bad"
        let missing = try await enqueue(db, photo, #"watermark("\#(TestEnvironment.origin)/status/404") |> format(png)"#, "{}")
        let blocked = try await enqueue(db, photo, #"watermark("http://169.254.169.254/latest/meta-data") |> format(png)"#, "{}")
        let invalid = try await enqueue(db, photo, #"watermark("ftp://example.com/mark.png") |> format(png)"#, "{}")
        let tooLarge = try await enqueue(db, photo, "watermark(\"\(mark)\", scale=1) |> format(png)", "{}")
        try await drain(db, store)

        for id in good {
            let r = try await db.query("SELECT state::text, result_path FROM halcyon.jobs WHERE id = $1::bigint", [id])
            #expect(r.value(0, "state") == "succeeded")
            let bytes = try #require(FileManager.default.contents(atPath: store.appendingPathComponent(r.value(0, "result_path") ?? "").path))
            let image = try MagickImage.decode(bytes, format: .png)
            #expect(image.pixel(x: 334, y: 259).blue > 0.95, "the watermark at the south-east corner")
        }
        let downloads = try Origin.counts().filter { $0.key.contains("wm.png?t=\(db.name)") }
        #expect(downloads.values.reduce(0, +) == 1, "one download of the watermark: \(downloads)")
        for (id, code) in [
            (missing, "fetch.http_status"), (blocked, "fetch.blocked_address"), (invalid, "job.invalid_source"),
            (tooLarge, "image.watermark_too_large"),
        ] {
            let r = try await db.query(
                "SELECT state::text, errors -> -1 ->> 'code' AS code, last_error FROM halcyon.jobs WHERE id = $1::bigint", [id])
            #expect(r.value(0, "state") == "failed" && r.value(0, "code") == code, "\(r.dictionaries)")
        }
    }

    @Test(arguments: [
        (#"{"placeholders": ["blurhash", "sparkle"]}"#, "unknown placeholder"),
        (#"{"placeholders": "blurhash"}"#, "must be an array"),
        (#"{"placeholders": ["blurhash"], "blurhash_components": [10, 3]}"#, "from 1 to 9"),
        (#"{"blurhash_components": [4, 3]}"#, "needs \"blurhash\""),
        (#"{"keep_gps": "yes"}"#, "true or false"),
    ])
    func badPlaceholderOptionsFailBeforeAnyDownload(options: String, message: String) async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let url = "\(TestEnvironment.origin)/files/camera.jpg?t=\(db.name)-bad"
        let id = try await enqueue(db, url, "", options)
        try await drain(db, store)
        let r = try await db.query("SELECT state::text, errors -> -1 ->> 'code' AS code, last_error FROM halcyon.jobs WHERE id = $1::bigint", [id])
        #expect(r.value(0, "state") == "failed")
        #expect(r.value(0, "code") == "job.invalid_options")
        #expect(r.value(0, "last_error")?.contains(message) == true, "\(r.value(0, "last_error") ?? "")")
        #expect(try Origin.counts().keys.allSatisfy { !$0.contains("t=\(db.name)-bad") }, "nothing downloaded")
    }
}
