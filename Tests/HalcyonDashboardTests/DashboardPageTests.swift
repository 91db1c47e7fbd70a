import Foundation
import HalcyonDashboard
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import HalcyonStore
import HalcyonTestSupport
import Testing

/// The pages and the API over HTTP, against the real PostgreSQL and a store a real worker wrote.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"))
struct DashboardPageTests {
    @Test func overviewCountsWhatTheTableHolds() async throws {
        let f = try await DashboardFixture.shared.value
        let server = try await f.server()
        defer { server.stop() }
        // A queue with fleet-wide limits shows them (and its API entry carries them).
        let limited = "limited-\(UUID().uuidString.prefix(6))"
        _ = try await f.value(
            "INSERT INTO halcyon.queues (name, max_running, max_per_second) VALUES ('\(limited)', 2, 0.5) RETURNING name AS v")
        let page = try await HTTP.get(server, "/")
        #expect(page.status == 200)
        #expect(page.headers["content-security-policy"]?.contains("script-src 'self'") == true)
        #expect(page.text.contains(">\(limited)</a></td><td> <span class=\"muted limits\">at most 2 running, 0.5 a second</span>"))
        let failed = try #require(try await f.value("SELECT count(*)::text AS v FROM halcyon.jobs WHERE state = 'failed'"))
        let succeeded = try #require(try await f.value("SELECT count(*)::text AS v FROM halcyon.jobs WHERE state = 'succeeded'"))
        #expect(page.text.contains("data-state=\"failed\">\(failed)<"))
        #expect(page.text.contains("data-state=\"succeeded\">\(succeeded)<"))
        #expect(page.text.contains("fetch.http_status"), "failures by code")
        #expect(page.text.contains("<svg class=\"chart\""), "the throughput chart")
        #expect(page.text.contains("badge stopped"), "the drained worker is listed as stopped")
        #expect(page.text.contains(" in 2 files of 65.5 KB</p><svg"), "the store against its limit, as the sweep left it")

        let api = try await HTTP.get(server, "/api/overview")
        #expect(api.status == 200 && api.headers["content-type"] == "application/json")
        let json = try #require(JSONValue.parse(api.text))
        #expect(json["counts"]?["failed"]?["value"]?.numberValue == Double(failed))
        #expect(json["counts"]?["succeeded"]?["kind"]?.stringValue == "exact")
        #expect(json["failures_24h"]?.arrayValue?.first?["code"]?.stringValue == "fetch.http_status")
        let entry = json["queues"]?.arrayValue?.first { $0["name"]?.stringValue == limited }
        #expect(entry?["max_running"]?.numberValue == 2 && entry?["max_per_second"]?.numberValue == 0.5)
        #expect(entry?["max_running_per_key"] == .null)
    }

    /// `/usage` and `/api/usage`: the fixture's worker ran its jobs in the common share of the
    /// default queue; the page and the API count them as `JobQueue.usage` does.
    @Test func usagePageCountsWhatTheWorkersRan() async throws {
        let f = try await DashboardFixture.shared.value
        let server = try await f.server()
        defer { server.stop() }
        let succeeded = try #require(try await f.value("SELECT count(*)::text AS v FROM halcyon.jobs WHERE state = 'succeeded'"))
        let page = try await HTTP.get(server, "/usage")
        #expect(page.status == 200 && page.headers["content-type"] == "text/html; charset=utf-8")
        #expect(
            page.text.contains("<h2>Last 24 hours</h2>") && page.text.contains("<a href=\"/usage?period=7d\">7d</a>"), "\(page.text.prefix(2000))")
        #expect(page.text.contains("<a href=\"/usage\" aria-current=\"page\">Usage</a>"), "the navigation marks the page")
        #expect(
            page.text.contains(
                "<td><a href=\"/jobs?queue=default\">default</a></td><td><span class=\"muted\">common share</span></td><td class=\"num\">\(succeeded)</td>"
            ))
        let api = try await HTTP.get(server, "/api/usage")
        #expect(api.status == 200 && api.headers["content-type"] == "application/json")
        let json = try #require(JSONValue.parse(api.text))
        for period in ["24h", "7d"] {
            let json = try #require(JSONValue.parse(try await HTTP.get(server, "/api/usage?period=\(period)").text))
            #expect(json["period"]?.stringValue == period && json["sort"]?.stringValue == "cpu")
            #expect(json["total"]?["succeeded"]?.numberValue == Double(succeeded), "\(json)")
            #expect(json["rows"]?.arrayValue?.first?["fair_key"] == .null, "\(json)")
            #expect(json["more"]?.boolValue == false && json["next_offset"] == .null && json["total_rows"]?.numberValue == 1, "\(json)")
        }
        #expect(json["period"]?.stringValue == "24h", "the default period")
        for bad in ["period=1y", "sort=name", "offset=-1", "offset=100001", "queue=a%20b"] {
            let refused = try await HTTP.get(server, "/api/usage?" + bad)
            #expect(refused.status == 400 && JSONValue.parse(refused.text)?["error"]?.stringValue != nil, "\(bad): \(refused.status)")
        }
    }

    @Test func countsStopAtTheCapAndSaySo() async throws {
        let f = try await DashboardFixture.shared.value
        let server = try await f.server { $0.countCap = 1 }
        defer { server.stop() }
        let json = try #require(JSONValue.parse(try await HTTP.get(server, "/api/overview").text))
        #expect(json["counts"]?["failed"]?["value"]?.numberValue == 1 && json["counts"]?["failed"]?["kind"]?.stringValue == "at_least")
        #expect(json["counts"]?["queued"]?["kind"]?.stringValue == "exact")
        #expect(json["failures_capped"]?.boolValue == true, "two failures read, a cap of one")
        let page = try await HTTP.get(server, "/").text
        #expect(page.contains("data-state=\"failed\">1+<"))
        let list = try await HTTP.get(server, "/jobs?state=failed").text
        #expect(list.contains("<strong>1+</strong> jobs match"))
    }

    @Test func jobListFiltersPagesAndShowsThumbnails() async throws {
        let f = try await DashboardFixture.shared.value
        let server = try await f.server { $0.pageSize = 1 }
        defer { server.stop() }
        let succeeded = try await HTTP.get(server, "/jobs?state=succeeded")
        #expect(succeeded.status == 200)
        #expect(succeeded.text.contains("<strong>2</strong> jobs match"))
        #expect(!succeeded.text.contains("action=\"/jobs/retry\"") && !succeeded.text.contains("action=\"/jobs/cancel\""), "nothing to act on")
        let failed = try await HTTP.get(server, "/jobs?state=failed").text
        #expect(failed.contains("action=\"/jobs/retry\"") && !failed.contains("action=\"/jobs/cancel\""))
        #expect(failed.contains("<input type=\"hidden\" name=\"state\" value=\"failed\">"), "the bulk form carries the filter")
        let digest = try #require(try await f.value("SELECT result_digest AS v FROM halcyon.jobs WHERE id = $1::bigint", [String(f.photo)]))
        #expect(succeeded.text.contains("src=\"/results/\(digest)\""), "the newest succeeded job's thumbnail")
        // One per page: the next page is the older job, and it is the last.
        let older = try #require(succeeded.text.range(of: "before=\(f.photo)\">older"), "a link to the older page")
        _ = older
        let second = try await HTTP.get(server, "/jobs?state=succeeded&before=\(f.photo)")
        #expect(second.text.contains("/jobs/\(f.magenta)\"") && !second.text.contains("older »"))

        let bySource = try await HTTP.get(server, "/api/jobs?source=DASHBOARD-MAGENTA")
        let jobs = try #require(JSONValue.parse(bySource.text)?["jobs"]?.arrayValue)
        #expect(jobs.count == 1 && jobs.first?["id"]?.numberValue == Double(f.magenta), "source substring, case-insensitive")
        let byCode = try #require(JSONValue.parse(try await HTTP.get(server, "/api/jobs?code=fetch.http_status").text))
        #expect(byCode["matching"]?.numberValue == 2)

        // A time range of when jobs finished: all of them before a minute from now, none after.
        let soon = ISO8601.format(Date().addingTimeInterval(60))
        let before = try #require(JSONValue.parse(try await HTTP.get(server, "/api/jobs?to=\(HTMLPercent.encode(soon))").text))
        #expect(before["matching"]?.numberValue == 4)
        let after = try #require(JSONValue.parse(try await HTTP.get(server, "/api/jobs?from=\(HTMLPercent.encode(soon))").text))
        #expect(after["matching"]?.numberValue == 0)
        let local = try #require(JSONValue.parse(try await HTTP.get(server, "/api/jobs?from=2000-01-01T00:00&to=2100-01-01T00:00").text))
        #expect(local["matching"]?.numberValue == 4, "datetime-local values, read as UTC")
        #expect(try await HTTP.get(server, "/jobs?from=yesterday").status == 400)

        #expect(try await HTTP.get(server, "/jobs?state=exploded").status == 400)
        #expect(try await HTTP.get(server, "/jobs?since=5y").status == 400)
        #expect(try await HTTP.get(server, "/jobs?before=-3").status == 400)
        #expect(try await HTTP.get(server, "/jobs?queue=" + String(repeating: "q", count: 2000)).status == 400)
    }

    @Test func jobPageShowsInputsResultFactsTimingsAndErrors() async throws {
        let f = try await DashboardFixture.shared.value
        let server = try await f.server()
        defer { server.stop() }
        let page = try await HTTP.get(server, "/jobs/\(f.photo)")
        #expect(page.status == 200)
        let text = page.text
        #expect(text.contains("resize(320x320,mode=fill)"), "the canonical identifier: \(text.prefix(400))")
        let digest = try #require(try await f.value("SELECT result_digest AS v FROM halcyon.jobs WHERE id = $1::bigint", [String(f.photo)]))
        #expect(text.contains("<img class=\"result\" src=\"/results/\(digest)\""))
        #expect(text.contains("jpeg 640×480"), "the source's facts")
        #expect(text.contains("aria-label=\"stage timings\""))
        #expect(text.contains("expires</dt><dd>20"), "the result's expiry from the store")
        #expect(text.contains("quality</dt><dd>82</dd>") && text.contains("score</dt><dd><span class=\"muted\">—"), "the encoder's quality; no score")
        #expect(!text.contains("action=\"/jobs/\(f.photo)/retry\""), "a succeeded job has no retry")

        let failed = try await HTTP.get(server, "/jobs/\(f.missing)").text
        #expect(failed.contains("fetch.http_status") && failed.contains("action=\"/jobs/\(f.missing)/retry\""))

        let api = try #require(JSONValue.parse(try await HTTP.get(server, "/api/jobs/\(f.photo)").text))
        #expect(api["result_digest"]?.stringValue == digest && api["result_width"]?.numberValue == 320)
        #expect(api["result_quality"]?.numberValue == 82 && api["result_score"] == .null)
        #expect(api["timings"]?["total_ms"]?.numberValue != nil && api["tags"]?.arrayValue == [])

        #expect(try await HTTP.get(server, "/jobs/99999999").status == 404)
        #expect(try await HTTP.get(server, "/jobs/abc").status == 404)
        #expect(try await HTTP.get(server, "/api/jobs/0").status == 404)
    }

    /// A job with a perceptual hash lists its near-duplicates, linked, with their distance and
    /// the dihedral variant that matched; an unrelated job is not among them.
    @Test func jobPageListsNearDuplicates() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let a = String(repeating: "0f", count: 32), near = "1f" + String(repeating: "0f", count: 31)
        let turned = String(repeating: "3c", count: 32), far = String(repeating: "f0", count: 32)
        let dihedral = "{" + ([turned] + Array(repeating: far, count: 6)).joined(separator: ",") + "}"
        try await db.query(
            """
            INSERT INTO halcyon.jobs (source, source_format, source_pdq, source_pdq_quality, source_pdq_dihedral) VALUES
              ('https://example.com/a.jpg', 'jpeg', $1, 100, $4::text[]), ('https://example.com/near.jpg', 'jpeg', $2, 90, NULL),
              ('https://example.com/turned.jpg', 'jpeg', $3, 90, NULL), ('https://example.com/far.jpg', 'jpeg', $5, 80, NULL)
            """, [a, near, turned, dihedral, String(repeating: "a5", count: 32)])
        let server = try await DashboardFixture.server(db, store: store)
        defer { server.stop() }
        let page = try await HTTP.get(server, "/jobs/1").text
        #expect(page.contains("<code>\(a) (PDQ, quality 100)</code>"), "\(page)")
        #expect(page.contains("<a href=\"/jobs/2\">#2 (1 bits)</a>") && page.contains("<a href=\"/jobs/3\">#3 (0 bits, rotate90)</a>"), "\(page)")
        #expect(!page.contains("href=\"/jobs/4\""), "an unrelated job is not listed")
    }

    /// A picture set's page draws each rung, captioned, and serves each from the store; the API
    /// carries the manifest.
    @Test(.processes) func jobPageDrawsEachRungOfAPictureSet() async throws {
        let db = try await TestDatabase.create()
        let store = try TestEnvironment.temporaryDirectory("store")
        let url = try Origin.publish("dashboard-set.jpg", try Data(contentsOf: publicFixture("photos/tiger.jpg")))
        try await db.query(
            "INSERT INTO halcyon.jobs (source, processors) VALUES ($1, $2)",
            [url + "?t=\(db.name)", "breakpoints(min_width=200, max_width=800, bytes_step=8000, max_images=3, formats=webp|jpeg, min_score=70)"])
        let w = try HalcyonProcess(
            ["work", "--store", store.path, "--log-level", "info", "--allow-network", "127.0.0.1/32", "--drain"], conninfo: db.conninfo)
        #expect(await w.wait(timeout: 180) == 0, "\(w.output.suffix(2000))")
        let server = try await DashboardFixture.server(db, store: store)
        defer { server.stop() }
        let manifest = try #require(
            (try await db.query("SELECT result_manifest::text AS m FROM halcyon.jobs WHERE id = 1").value(0, "m")).flatMap(
                PictureManifest.init(jsonText:)))
        let page = try await HTTP.get(server, "/jobs/1").text
        #expect(page.contains("<h2>Picture set</h2>"))
        #expect(page.components(separatedBy: "<img class=\"rung\"").count - 1 == manifest.rungs.count, "one drawing per rung")
        for rung in manifest.rungs {
            let digest = rung.path.split(separator: "/").last!.split(separator: ".").first!
            #expect(page.contains("<img class=\"rung\" src=\"/results/\(digest)\""), "\(rung.format) \(rung.width)")
            #expect(page.contains("\(rung.format.rawValue) \(rung.width)×\(rung.height)"))
            let served = try await HTTP.get(server, "/results/\(digest)")
            #expect(served.status == 200 && served.body.count == rung.bytes && served.headers["content-type"] == rung.format.mediaType)
        }
        let api = try #require(JSONValue.parse(try await HTTP.get(server, "/api/jobs/1").text))
        #expect(api["result_manifest"]?["rungs"]?.arrayValue?.count == manifest.rungs.count)
    }

    @Test func markupInJobFieldsRendersAsText() async throws {
        let f = try await DashboardFixture.shared.value
        let server = try await f.server()
        defer { server.stop() }
        for target in ["/jobs/\(f.hostile)", "/jobs", "/jobs?state=failed", "/", "/jobs?tag=\(HTMLPercent.encode(f.markup))"] {
            let page = try await HTTP.get(server, target)
            #expect(page.status == 200, "\(target)")
            #expect(!page.text.contains("<script>alert"), "\(target) holds live markup")
        }
        let job = try await HTTP.get(server, "/jobs/\(f.hostile)").text
        #expect(job.contains("&lt;script&gt;alert(&#39;halcyon&#39;)&lt;/script&gt;"), "the source, tag, cache key and error as text")
        // The API carries the bytes as they are, as JSON strings.
        let api = try #require(JSONValue.parse(try await HTTP.get(server, "/api/jobs/\(f.hostile)").text))
        #expect(api["cache_key"]?.stringValue == f.markup)
    }

    @Test func resultsAreServedByDigestFromInsideTheStoreOnly() async throws {
        let f = try await DashboardFixture.shared.value
        let server = try await f.server()
        defer { server.stop() }
        let digest = try #require(try await f.value("SELECT result_digest AS v FROM halcyon.jobs WHERE id = $1::bigint", [String(f.magenta)]))
        let image = try await HTTP.get(server, "/results/\(digest)")
        #expect(image.status == 200 && image.headers["content-type"] == "image/png")
        #expect(Digest.sha256Hex(image.body) == digest, "the bytes are the stored object's")
        #expect(image.headers["cache-control"]?.hasPrefix("private, max-age=") == true)
        let before = try #require(FileTimes.read(f.store.appendingPathComponent(StoreLayout.objectPath(digest: digest, ext: "png")).path))
        _ = try await HTTP.get(server, "/results/\(digest)")
        let after = try #require(FileTimes.read(f.store.appendingPathComponent(StoreLayout.objectPath(digest: digest, ext: "png")).path))
        #expect(before == after, "serving does not move the access time the expiry is computed from")

        // A symlink planted where an object would be is not followed.
        let fake = String(repeating: "ab", count: 32)
        let dir = f.store.appendingPathComponent("objects/ab/ab")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try? FileManager.default.removeItem(at: dir.appendingPathComponent("\(fake).jpg"))
        try FileManager.default.createSymbolicLink(atPath: dir.appendingPathComponent("\(fake).jpg").path, withDestinationPath: "/etc/passwd")
        for target in [
            "/results/\(fake)", "/results/../../../../etc/passwd", "/results/..%2f..%2f..%2fetc%2fpasswd", "/results/%2e%2e/%2e%2e/etc/passwd",
            "/results/\(digest.uppercased())", "/results/\(digest)/../\(digest)", "/results/\(String(digest.dropLast()))", "/results/",
            "/results/\(String(repeating: "0", count: 64))",
        ] {
            let r = try await HTTP.get(server, target)
            #expect(r.status == 404, "\(target): \(r.status)")
            #expect(!r.text.contains("root:"), "\(target) leaked a file")
        }
        // Without a store, nothing is served.
        let storeless = try await f.server { $0.storeRoot = nil }
        defer { storeless.stop() }
        #expect(try await HTTP.get(storeless, "/results/\(digest)").status == 404)
    }
}

enum HTMLPercent {
    static func encode(_ s: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return s.addingPercentEncoding(withAllowedCharacters: allowed)!
    }
}
