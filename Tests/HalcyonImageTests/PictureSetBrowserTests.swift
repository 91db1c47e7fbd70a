import Foundation
import HalcyonDomain
import HalcyonImage
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// The `<picture>` a picture set's manifest writes (`PictureManifest.picture`), in a real headless
/// browser (Debian's chromium, which `scripts/test` installs unless HALCYON_SKIP_BROWSER_TESTS=1):
/// at each viewport and device pixel ratio the browser fetches the one rung the markup's
/// `srcset`/`sizes` select, in the first format it takes (AVIF), and nothing else of the set.
///
/// The rungs are Halcyon's own encodes of a photograph, 200, 400 and 800 wide in AVIF, WebP and
/// JPEG, served by the test origin; each browser run has a profile of its own (no cache), and what
/// it fetched is read from the origin's request counts.
@Suite(
    .enabled(if: TestEnvironment.available, "needs scripts/test (origin)"),
    .enabled(if: ProcessInfo.processInfo.environment["HALCYON_SKIP_BROWSER_TESTS"] != "1", "HALCYON_SKIP_BROWSER_TESTS=1"), .processes(2))
struct PictureSetBrowserTests {
    static var chromium: String? {
        let candidates = [ProcessInfo.processInfo.environment["HALCYON_CHROMIUM"], "/usr/bin/chromium", "/usr/bin/chromium-browser"]
        return candidates.compactMap { $0 }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs chromium headless on `url` in a `width`×`height` window at device scale `scale`, with a
    /// fresh profile; the DOM it dumps once the page has loaded (virtual time).
    func browse(_ url: String, width: Int, height: Int, scale: Int, profile: URL) async throws -> String {
        let browser = try #require(Self.chromium, "chromium is not installed (scripts/setup --browser installs it)")
        let run = try HalcyonProcess(
            [
                "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--user-data-dir=\(profile.path)",
                "--window-size=\(width),\(height)", "--force-device-scale-factor=\(scale)", "--virtual-time-budget=3000", "--dump-dom", url,
            ], conninfo: nil, environment: ["HOME": profile.path], executable: browser)
        let status = await run.wait(timeout: 120)
        #expect(status == 0, "chromium: \(run.output.suffix(2000))")
        // Standard error shares the file: the document is what lies between its tags.
        let output = run.output
        guard let start = output.range(of: "<html"), let end = output.range(of: "</html>", options: .backwards) else { return output }
        return String(output[start.lowerBound..<end.upperBound])
    }

    /// The value of attribute `name` in the first `<tag …>` of `html`.
    func attribute(_ name: String, of tag: String, in html: String) -> String? {
        guard let open = html.range(of: "<\(tag) "), let close = html[open.upperBound...].firstIndex(of: ">") else { return nil }
        let element = html[open.upperBound..<close]
        guard let key = element.range(of: " \(name)=\"") ?? (element.hasPrefix("\(name)=\"") ? element.range(of: "\(name)=\"") : nil),
            let quote = element[key.upperBound...].firstIndex(of: "\"")
        else { return nil }
        return String(element[key.upperBound..<quote])
    }

    /// What JavaScript's `encodeURIComponent` makes of `text`.
    func uriComponent(_ text: String) -> String {
        var allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        allowed.insert(charactersIn: "-_.!~*'()")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    @Test func browserFetchesTheRungTheMarkupSelects() async throws {
        // 800×547: rungs 200, 400 and 800 wide in each format, none enlarged.
        let photo = try Data(contentsOf: publicFixture("photos/tiger.jpg"))
        let widths = [200, 400, 800]
        let formats: [(ImageFormat, String)] = [(.avif, "quality=60"), (.webp, "quality=75"), (.jpeg, "quality=80")]
        let chains = try formats.flatMap { format, quality in
            try widths.map { try ProcessorChain.parse("resize(\($0)x16384) |> format(\(format.rawValue), \(quality))") }
        }
        let images = try ImagePipeline.run(photo, format: .jpeg, chains: chains).map { try $0.get() }

        // Each rung at its store path (`objects/ab/cd/<sha256>.<ext>`) under a base URL of this
        // run's own: the origin's `/store/RUN/objects/ab/cd/NAME` serves the file NAME.
        let run = (0..<16).map { _ in String(Int.random(in: 0..<16), radix: 16) }.joined()
        var rungs: [PictureRung] = []
        for (image, (width, format)) in zip(images, formats.flatMap { format in widths.map { ($0, format.0) } }) {
            #expect(image.format == format && image.width == width, "\(format) \(width): \(image.format) \(image.width)×\(image.height)")
            let digest = Digest.sha256Hex(image.data), name = "\(digest).\(format.fileExtension)"
            try Origin.publish(name, image.data)
            rungs.append(
                PictureRung(
                    width: image.width, height: image.height, format: format, bytes: image.data.count, score: nil, quality: image.quality,
                    path: "objects/\(digest.prefix(2))/\(digest.dropFirst(2).prefix(2))/\(name)"))
        }
        let manifest = PictureManifest(rungs: rungs)
        #expect(PictureManifest(jsonText: manifest.storedJSON) == manifest, "every path is a store object's (isObjectPath)")
        let base = "\(TestEnvironment.origin)/store/\(run)/"
        let requestPath = { (format: ImageFormat, width: Int) in
            "/store/\(run)/" + (manifest.rungs.first { $0.format == format && $0.width == width }?.path ?? "?")
        }

        var options = PictureOptions()
        // Drawn 180 px wide from 1000 px on, half the viewport below.
        options.sizes = "(min-width: 1000px) 180px, 50vw"
        options.baseURL = base
        let alt = "A tiger \"Shere Khan\" & <friends>"
        options.alt = alt
        let picture = manifest.picture(options)
        // The page writes what the browser made of the image once it loaded: which candidate, its
        // decoded size (an image that failed to decode has none), the viewport it was chosen for.
        let page = """
            <!doctype html><html><head><meta charset="utf-8"><title>picture</title>
            <style>body { margin: 0 } img { display: block; width: 50vw; height: auto }
            @media (min-width: 1000px) { img { width: 180px } }</style></head>
            <body>\(picture)<script>
            const img = document.querySelector("picture > img");
            const seen = () => {
              const d = document.body.dataset;
              d.current = img.currentSrc;
              d.natural = img.naturalWidth + "x" + img.naturalHeight;
              d.viewport = window.innerWidth + "x" + window.devicePixelRatio;
              d.alt = encodeURIComponent(img.alt);
            };
            if (img.complete && img.naturalWidth > 0) seen(); else img.addEventListener("load", seen);
            </script></body></html>
            """
        try Origin.publish("\(run).html", Data(page.utf8))
        let pageURL = "\(TestEnvironment.origin)/as/text/html/\(run).html"

        // Candidate density = width / slot (CSS px); Chromium takes the narrowest at least the DPR
        // (above DPR 1, the one below when the DPR is under the two densities' geometric mean).
        // Headless Chromium makes a window at least 500 px wide: the viewports are wider.
        //    600 px, DPR 1: slot 300 (50vw) → 0.67, 1.33, 2.67 → 400
        //    600 px, DPR 2: slot 300 (50vw) → 0.67, 1.33, 2.67 → 800 (mean of 1.33 and 2.67: 1.89 < 2)
        //   1200 px, DPR 1: slot 180        → 1.11, 2.22, 4.44 → 200
        let cases: [(width: Int, scale: Int, slot: Int, expected: Int)] = [(600, 1, 300, 400), (600, 2, 300, 800), (1200, 1, 180, 200)]
        let work = try TestEnvironment.temporaryDirectory("picture-browser")
        let largest = try #require(manifest.rungs(.jpeg).last)
        #expect(largest.width == 800 && largest.height == images.last?.height, "the widest JPEG: \(largest.width)×\(largest.height)")
        for (index, c) in cases.enumerated() {
            let label = "viewport \(c.width), DPR \(c.scale)"
            let before = try Origin.counts()
            let dom = try await browse(pageURL, width: c.width, height: 800, scale: c.scale, profile: work.appendingPathComponent("p\(index)"))
            let after = try Origin.counts()
            var delta: [String: Int] = [:]
            for (key, n) in after where key.contains(run) && !key.hasSuffix(".html") && n != before[key] ?? 0 {
                delta[key] = n - (before[key] ?? 0)
            }

            // Exactly the AVIF rung selected, once: no WebP or JPEG, no other width.
            #expect(delta == [requestPath(.avif, c.expected): 1], "\(label): fetched \(delta)")
            let expectedRung = try #require(manifest.rungs(.avif).first { $0.width == c.expected })
            #expect(attribute("data-current", of: "body", in: dom) == base + expectedRung.path, "\(label): \(dom.suffix(1500))")
            // Decoded (a failed decode has no size), and sized by its `w` descriptor and `sizes`: a
            // candidate's natural width is its pixels over its density, the slot's width.
            let natural = attribute("data-natural", of: "body", in: dom)?.split(separator: "x").compactMap { Int($0) } ?? []
            #expect(natural.count == 2 && abs(natural[0] - c.slot) <= 1 && natural[1] > 0, "\(label): decoded, natural size \(natural)")
            #expect(attribute("data-viewport", of: "body", in: dom) == "\(c.width)x\(c.scale)", "\(label): the window chromium had")

            // The markup as the browser parsed it: two sources, an <img> sized as the largest JPEG
            // (the fallback's) rung, the alt text intact.
            #expect(dom.components(separatedBy: "<source ").count == 3, "\(label): \(dom.prefix(3000))")
            #expect(attribute("type", of: "source", in: dom) == "image/avif")
            #expect(attribute("width", of: "img", in: dom) == "\(largest.width)", "\(label)")
            #expect(attribute("height", of: "img", in: dom) == "\(largest.height)", "\(label)")
            #expect(attribute("data-alt", of: "body", in: dom) == uriComponent(alt), "\(label): alt as the browser read it")
        }
    }
}
