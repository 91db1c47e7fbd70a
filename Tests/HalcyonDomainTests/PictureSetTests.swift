import Foundation
import HalcyonDomain
import HalcyonRuntime
import Testing

/// A picture set's manifest and markup: the `picture` option's bounds, srcsets, the `<picture>`
/// element (escaped, width and height from the fallback's largest rung), and what a manifest read
/// back refuses.
@Suite struct PictureSetTests {
    static let digest = String(repeating: "ab", count: 32)
    static func rung(_ width: Int, _ format: ImageFormat, bytes: Int) -> PictureRung {
        PictureRung(
            width: width, height: width * 2 / 3, format: format, bytes: bytes, score: 80.123, quality: 61,
            path: "objects/ab/ab/\(digest).\(format.fileExtension)")
    }
    static let manifest = PictureManifest(rungs: [
        rung(320, .avif, bytes: 9000), rung(800, .avif, bytes: 30000), rung(320, .webp, bytes: 11000), rung(800, .webp, bytes: 36000),
        rung(320, .jpeg, bytes: 14000), rung(640, .jpeg, bytes: 30000), rung(800, .jpeg, bytes: 41000),
    ])

    @Test func srcsetsAndThePicture() throws {
        let m = Self.manifest
        #expect(m.formats == [.avif, .webp, .jpeg] && m.fallback == .jpeg)
        let d = Self.digest
        #expect(m.srcset(.webp) == "objects/ab/ab/\(d).webp 320w, objects/ab/ab/\(d).webp 800w")
        #expect(
            m.srcset(.jpeg, baseURL: "https://cdn.test/")
                == "https://cdn.test/objects/ab/ab/\(d).jpg 320w, https://cdn.test/objects/ab/ab/\(d).jpg 640w, https://cdn.test/objects/ab/ab/\(d).jpg 800w"
        )
        var options = PictureOptions()
        options.sizes = "(max-width: 600px) 100vw, 600px"
        options.alt = #"Tom & "Jerry" <3"#
        let html = m.picture(options)
        #expect(
            html.hasPrefix(
                #"<picture><source type="image/avif" srcset="objects/ab/ab/\#(d).avif 320w, objects/ab/ab/\#(d).avif 800w" sizes="(max-width: 600px) 100vw, 600px"><source type="image/webp""#
            ))
        #expect(html.contains(#"<img src="objects/ab/ab/\#(d).jpg" srcset="objects/ab/ab/\#(d).jpg 320w, "#))
        #expect(html.contains(#"width="800" height="533" alt="Tom &amp; &quot;Jerry&quot; &lt;3""#) && html.hasSuffix("</picture>"))
        #expect(html.components(separatedBy: "<source").count == 3, "a source per format but the fallback")
        let row = try #require(JSONValue.parse(m.rowJSON(options)))
        #expect(row["picture"]?.stringValue == html && row["sizes"]?.stringValue == options.sizes)
        #expect(row["srcset"]?["avif"]?.stringValue == m.srcset(.avif))
        #expect(row["rungs"]?.arrayValue?.first?["score"]?.numberValue == 80.12, "scores to two decimals")
    }

    @Test func aManifestReadsBackAsStoredAndRefusesWhatIsNotOne() throws {
        let m = Self.manifest
        #expect(
            PictureManifest(jsonText: m.storedJSON)
                == PictureManifest(
                    rungs: m.rungs.map {
                        var r = $0; r.score = 80.12; return r
                    }))
        #expect(PictureManifest(jsonText: m.rowJSON(PictureOptions()))?.rungs.count == 7, "a row's manifest reads too")
        let path = "objects/ab/ab/\(Self.digest).avif"
        let good = #"{"width":320,"height":213,"format":"avif","bytes":9000,"score":80,"quality":61,"path":"\#(path)"}"#
        #expect(PictureManifest(jsonText: #"{"rungs":[\#(good)]}"#) != nil)
        for bad in [
            #"{"rungs":[]}"#, "[]", "{",
            #"{"rungs":[\#(good.replacingOccurrences(of: path, with: "objects/a\" onload=\"x.avif"))]}"#,
            #"{"rungs":[\#(good.replacingOccurrences(of: "objects/ab/ab/", with: "objects/cd/ab/"))]}"#,
            #"{"rungs":[\#(good.replacingOccurrences(of: "objects/ab/ab/", with: "objects/ab/ab/../"))]}"#,
            #"{"rungs":[\#(good.replacingOccurrences(of: ".avif", with: ".avif.sh"))]}"#,
            #"{"rungs":[\#(good.replacingOccurrences(of: "objects/ab", with: "../ab"))]}"#,
            #"{"rungs":[\#(good.replacingOccurrences(of: "\"width\":320", with: "\"width\":0"))]}"#,
            #"{"rungs":[\#(good.replacingOccurrences(of: "\"avif\"", with: "\"svg\""))]}"#,
            #"{"rungs":[\#(Array(repeating: good, count: 81).joined(separator: ","))]}"#,
        ] {
            #expect(PictureManifest(jsonText: bad) == nil, "\(bad.prefix(120))")
        }
    }

    @Test func thePictureOptionIsBounded() throws {
        let options = try JobOptions.parse(json: #"{"picture": {"sizes": "50vw", "base_url": "https://cdn.test/s/", "alt": "a fox"}}"#)
        #expect(options.picture?.sizes == "50vw" && options.picture?.baseURL == "https://cdn.test/s/" && options.picture?.alt == "a fox")
        #expect(try JobOptions.parse(json: "{}").picture == nil)
        let hero = try #require(try JobOptions.parse(json: #"{"picture": {"loading": "eager"}}"#).picture)
        #expect(Self.manifest.picture(hero).hasSuffix(#" loading="eager" fetchpriority="high"></picture>"#))
        #expect(Self.manifest.picture().hasSuffix(#" loading="lazy" decoding="async"></picture>"#))
        for (bad, says) in [
            (#"{"picture": "50vw"}"#, "option 'picture' must be an object"), (#"{"picture": {"size": "50vw"}}"#, "unknown key 'picture.size'"),
            (#"{"picture": {"sizes": 5}}"#, "picture.sizes must be a string"), (#"{"picture": {"sizes": "  "}}"#, "picture.sizes must not be empty"),
            (#"{"picture": {"base_url": "https://a.test/x,y/"}}"#, "without commas, spaces, quotes"),
            (#"{"picture": {"base_url": "https://a.test/\"onerror=x/"}}"#, "without commas, spaces, quotes"),
            (#"{"picture": {"base_url": "https://a.test/?a=1&b="}}"#, "without commas, spaces, quotes"),
            (#"{"picture": {"base_url": "https://a.test/\#(String(repeating: "x", count: 500))/"}}"#, "at most 512 bytes"),
            (#"{"picture": {"alt": "a\u202Eb"}}"#, "bidirectional overrides"), (#"{"picture": {"sizes": "a\u0085b"}}"#, "control characters"),
            (#"{"picture": {"alt": "a\u0007b"}}"#, "without control characters"), (#"{"picture": {"loading": "auto"}}"#, "lazy or eager"),
            (#"{"picture": {"alt": "\#(String(repeating: "x", count: 1025))"}}"#, "at most 1024 bytes"),
        ] {
            #expect(throws: HalcyonError.self) { try JobOptions.parse(json: bad) }
            do {
                _ = try JobOptions.parse(json: bad)
            } catch {
                #expect(error.code == .invalidOptions && error.message.contains(says), "\(error.message)")
            }
        }
    }
}
