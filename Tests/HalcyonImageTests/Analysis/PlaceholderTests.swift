import Foundation
import HalcyonDomain
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// BlurHash, ThumbHash and the dominant colour, checked against the reference implementations
/// from PyPI (`blurhash`, `thumbhash-python`; `scripts/test` installs them).
@Suite(.cpuHeavy) struct PlaceholderTests {
    static let photo: Data = try! SampleImages.photo(width: 480, height: 320, seed: 5)

    func run(_ data: Data, _ format: ImageFormat, _ chain: String, _ request: PlaceholderRequest, direct: Bool? = nil) throws -> ProcessedImage {
        try ImagePipeline.run(data, format: format, chains: [ProcessorChain.parse(chain)], directLane: direct, placeholders: [request])[0].get()
    }

    static let all = PlaceholderRequest(kinds: Set(PlaceholderKind.allCases))

    /// Runs Python with the reference packages on `pixels`; returns its stdout.
    func reference(_ script: String, _ thumb: Thumbnail) throws -> String {
        let dir = try TestEnvironment.temporaryDirectory("placeholders")
        try Data(thumb.rgba).write(to: dir.appendingPathComponent("rgba"))
        let text = try referencePython(script, [dir.appendingPathComponent("rgba").path, "\(thumb.width)", "\(thumb.height)"])
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static let loader = """
        import sys
        data = open(sys.argv[1], 'rb').read(); w = int(sys.argv[2]); h = int(sys.argv[3])

        """

    /// The same pixels through the reference encoder give the same string, and the reference
    /// decoder turns it back into an image whose mean colour is the thumbnail's (over white).
    static let hasReferences = ProcessInfo.processInfo.environment["HALCYON_TEST_PYTHON"] != nil

    @Test(.enabled(if: hasReferences, "needs scripts/test's HALCYON_TEST_PYTHON"), arguments: [(4, 3), (1, 1), (9, 9), (5, 2)])
    func blurhashMatchesTheReferenceAndRoundTrips(x: Int, y: Int) throws {
        let png = try SampleImages.photo(width: 300, height: 200, seed: 9, format: .png, alpha: true)
        let thumb = try Thumbnail(try MagickImage.decode(png, format: .png))
        let ours = BlurHash.encode(thumb, x: x, y: y)
        let script =
            Self.loader + """
                import blurhash
                # The reference takes sRGB 0-255 or, with linear=True, linear light: pass linear over white.
                img = [[[0.0, 0.0, 0.0] for x in range(w)] for y in range(h)]
                for yy in range(h):
                    for xx in range(w):
                        for c in range(3):
                            a = data[(yy * w + xx) * 4 + 3] / 255.0
                            img[yy][xx][c] = blurhash.srgb_to_linear(data[(yy * w + xx) * 4 + c]) * a + (1 - a)
                ref = blurhash.encode(img, components_x=\(x), components_y=\(y), linear=True)
                out = blurhash.decode(\"\(ours)\", 32, 32)
                mean = [sum(out[j][i][c] for j in range(32) for i in range(32)) / 1024 for c in range(3)]
                print(ref, *[round(m) for m in mean])
                """
        let parts = try reference(script, thumb).split(separator: " ")
        #expect(String(parts[0]) == ours)
        // The DC term is the mean in linear light; compare in sRGB within a few levels.
        var linear = [0.0, 0.0, 0.0]
        for i in 0..<(thumb.width * thumb.height) {
            let a = Double(thumb.rgba[i * 4 + 3]) / 255
            for c in 0..<3 { linear[c] += BlurHash.sRGBToLinear(Double(thumb.rgba[i * 4 + c]) / 255) * a + (1 - a) }
        }
        let mean = linear.map { BlurHash.linearToSRGB($0 / Double(thumb.width * thumb.height)) }
        for c in 0..<3 { #expect(abs(Int(parts[c + 1])! - mean[c]) <= 12, "decoded mean \(parts) vs \(mean)") }
    }

    /// Byte for byte what the reference encoder makes of the same pixels, with and without alpha,
    /// landscape and portrait; and the reference decoder reads it back at the right aspect.
    @Test(
        .enabled(if: hasReferences, "needs scripts/test's HALCYON_TEST_PYTHON"),
        arguments: [(false, 300, 200), (true, 300, 200), (false, 120, 400), (true, 64, 64)])
    func thumbhashMatchesTheReference(alpha: Bool, width: Int, height: Int) throws {
        let png = try SampleImages.photo(width: width, height: height, seed: 3, format: .png, alpha: alpha)
        let thumb = try Thumbnail(try MagickImage.decode(png, format: .png))
        let ours = Data(ThumbHash.encode(thumb)).base64EncodedString()
        let script =
            Self.loader + """
                import base64
                from thumbhash.encode import rgba_to_thumbhash
                from thumbhash.decode import thumbhash_to_rgba
                ref = base64.b64encode(rgba_to_thumbhash(w, h, list(data))).decode()
                dw, dh, _ = thumbhash_to_rgba(base64.b64decode(\"\(ours)\"))
                print(ref, dw, dh)
                """
        let parts = try reference(script, thumb).split(separator: " ")
        #expect(String(parts[0]) == ours)
        let (dw, dh) = (Int(parts[1])!, Int(parts[2])!)
        #expect(width > height ? dw > dh : width < height ? dw < dh : dw == dh, "decoded \(dw)x\(dh)")
    }

    @Test func theDominantColourIsTheMostCommonOne() throws {
        // Two of three pixels are (nearly) red: red dominates, whatever the average says.
        let png = try Fixture.halves(90, 60, left: [220, 20, 30], right: [20, 40, 200])
        let thumb = Thumbnail(width: 3, height: 1, rgba: [220, 20, 30, 255, 221, 21, 31, 255, 20, 40, 200, 255])
        #expect(DominantColor.of(thumb) == "#dd151f")
        let transparent = Thumbnail(width: 2, height: 1, rgba: [1, 2, 3, 0, 9, 9, 9, 10])
        #expect(DominantColor.of(transparent) == "#ffffff")
        let out = try run(png, .png, "resize(60x40) |> format(png)", PlaceholderRequest(kinds: [.dominant_color]))
        let color = try #require(out.placeholders?.dominantColor)
        #expect(color == "#dc141e" || color == "#1428c8", "one of the halves: \(color)")
    }

    /// The placeholders describe the result (its crop and aspect), and both lanes agree.
    @Test func placeholdersComeFromTheResultInEitherLane() throws {
        let direct = try run(Self.photo, .jpeg, "resize(200x100, mode=fill)", Self.all, direct: true)
        let magick = try run(Self.photo, .jpeg, "resize(200x100, mode=fill)", Self.all, direct: false)
        for out in [direct, magick] {
            let p = try #require(out.placeholders)
            #expect(Placeholders.blurhashComponents(p.blurhash ?? "") ?? (0, 0) == (4, 3))
            let hash = try #require(Data(base64Encoded: p.thumbhash ?? ""))
            #expect(hash[4] >> 7 == 1, "landscape bit")
            #expect(p.dominantColor?.count == 7)
        }
        // The lanes' pixels differ by a level here and there: the strings agree on the DC term.
        #expect(direct.placeholders?.blurhash?.prefix(6) == magick.placeholders?.blurhash?.prefix(6))
        #expect(direct.placeholders?.thumbhash?.count == magick.placeholders?.thumbhash?.count, "neither has alpha")
        let none = try ImagePipeline.run(Self.photo, format: .jpeg, chain: ProcessorChain.parse("resize(64x64)"))
        #expect(none.placeholders == nil)
    }

    @Test func aRequestIsSatisfiedOnlyByWhatItAsksFor() {
        let stored = Placeholders(blurhash: "LEHV6nWB2yk8pyo0adR*.7kCMdnj", thumbhash: nil, dominantColor: "#102030")
        #expect(PlaceholderRequest(kinds: [.blurhash]).isSatisfied(by: stored))
        #expect(!PlaceholderRequest(kinds: [.blurhash], blurhashX: 5, blurhashY: 3).isSatisfied(by: stored))
        #expect(!PlaceholderRequest(kinds: [.thumbhash]).isSatisfied(by: stored))
        #expect(!PlaceholderRequest(kinds: [.dominant_color]).isSatisfied(by: nil))
        #expect(PlaceholderRequest(kinds: [.dominant_color]).select(from: stored) == Placeholders(dominantColor: "#102030"))
    }
}
