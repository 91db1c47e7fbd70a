import Foundation
import HalcyonDashboard
import HalcyonDomain
import HalcyonImage
import HalcyonTestSupport
import Testing

/// The overview and a job page in a real headless browser (Debian's chromium, which
/// `scripts/test` installs unless HALCYON_SKIP_BROWSER_TESTS=1): the page's own script runs
/// under the Content-Security-Policy, the result image loads and is on screen, and a job's
/// markup stays text. With HALCYON_SCREENSHOT_DIR set, the screenshots are kept there (README's).
@Suite(
    .enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"),
    .enabled(if: ProcessInfo.processInfo.environment["HALCYON_SKIP_BROWSER_TESTS"] != "1", "HALCYON_SKIP_BROWSER_TESTS=1"), .processes(2))
struct DashboardBrowserTests {
    static var chromium: String? {
        let candidates = [ProcessInfo.processInfo.environment["HALCYON_CHROMIUM"], "/usr/bin/chromium", "/usr/bin/chromium-browser"]
        return candidates.compactMap { $0 }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs chromium headless on `url` with `mode` (`--dump-dom` or `--screenshot=PATH`); its output.
    func browse(_ url: String, _ mode: String, profile: URL) async throws -> String {
        let browser = try #require(Self.chromium, "chromium is not installed (scripts/setup --browser installs it)")
        let run = try HalcyonProcess(
            [
                "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--user-data-dir=\(profile.path)",
                "--window-size=1200,860", "--virtual-time-budget=3000", mode, url,
            ], conninfo: nil, environment: ["HOME": profile.path], executable: browser)
        let status = await run.wait(timeout: 120)
        #expect(status == 0, "chromium: \(run.output.suffix(2000))")
        return run.output
    }

    /// Pixels of `png` close to magenta, on a 4-pixel grid.
    func magentaPixels(_ png: Data) throws -> Int {
        let image = try MagickImage.decode(png, format: .png)
        var n = 0
        for y in stride(from: 0, to: image.height, by: 4) {
            for x in stride(from: 0, to: image.width, by: 4) {
                let p = image.pixel(x: x, y: y)
                if p.red > 0.9 && p.green < 0.1 && p.blue > 0.9 { n += 1 }
            }
        }
        return n
    }

    @Test func overviewAndJobPageRenderInChromium() async throws {
        let f = try await DashboardFixture.shared.value
        let server = try await f.server()
        defer { server.stop() }
        let work = try TestEnvironment.temporaryDirectory("browser")
        let base = "http://127.0.0.1:\(server.port)"

        let overview = try await browse(base + "/", "--dump-dom", profile: work.appendingPathComponent("p1"))
        #expect(overview.contains("data-js=\"on\""), "dashboard.js ran under the CSP")
        #expect(overview.contains("data-state=\"succeeded\">2<") && overview.contains("data-state=\"failed\">2<"), "\(overview.suffix(3000))")
        #expect(overview.contains("fetch.http_status"))

        let usage = try await browse(base + "/usage", "--dump-dom", profile: work.appendingPathComponent("p5"))
        #expect(usage.contains("data-js=\"on\"") && usage.contains("<h2>Last 24 hours</h2>"), "\(usage.suffix(3000))")
        #expect(usage.contains("common share"), "the fixture's jobs, in the common share")

        let hostile = try await browse(base + "/jobs/\(f.hostile)", "--dump-dom", profile: work.appendingPathComponent("p2"))
        #expect(hostile.components(separatedBy: "<script").count == 2, "only dashboard.js: no script from the job's fields")
        #expect(hostile.contains("&lt;script&gt;alert('halcyon')&lt;/script&gt;"), "the markup as visible text")

        let shots = ProcessInfo.processInfo.environment["HALCYON_SCREENSHOT_DIR"].map { URL(fileURLWithPath: $0) } ?? work
        let jobShot = shots.appendingPathComponent("dashboard-job.png")
        _ = try await browse(base + "/jobs/\(f.magenta)", "--screenshot=\(jobShot.path)", profile: work.appendingPathComponent("p3"))
        let png = try Data(contentsOf: jobShot)
        // The 120×80 magenta result, drawn: on a 4-px grid that is ~600 points (a broken image: none).
        #expect(try magentaPixels(png) > 300, "the result image is on screen")

        let overviewShot = shots.appendingPathComponent("dashboard-overview.png")
        _ = try await browse(base + "/", "--screenshot=\(overviewShot.path)", profile: work.appendingPathComponent("p4"))
        #expect(try Data(contentsOf: overviewShot).count > 10_000)
    }
}
