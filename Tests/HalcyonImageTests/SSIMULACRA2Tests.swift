import Foundation
import HalcyonDomain
import HalcyonSamples
import HalcyonTestSupport
import Synchronization
import Testing

@testable import HalcyonImage

/// SSIMULACRA 2 (`SSIMULACRA2Reference`, in C in `Sources/CPerceptual`), checked against the
/// Python port on PyPI, `ssimulacra2` 0.3.0 (`scripts/test` installs it beside the placeholder
/// references; without `HALCYON_TEST_PYTHON` that test is skipped), and what holds without it:
/// identical images score 100, scores fall with JPEG quality, sizes and errors.
@Suite(.cpuHeavy) struct SSIMULACRA2Tests {
    static let hasReference = ProcessInfo.processInfo.environment["HALCYON_TEST_PYTHON"] != nil

    /// An image of the corpus: a file (or generated pixels), the part of it that is scored, and
    /// how it is distorted.
    struct Case {
        var name: String
        var image: () throws -> MagickImage
        /// width, height, x, y; nil for the whole image.
        var crop: (Int, Int, Int, Int)?
        var distortions: [Distortion] = Distortion.all
    }

    enum Distortion: String, CaseIterable {
        case jpeg30, jpeg60, jpeg82, jpeg95, webp75, blur, resize
        static let all = allCases

        /// The distorted image, encoded: JPEG or WebP at a quality, or a PNG blurred (σ 1.5) or
        /// resized to half and back (Halcyon's Lanczos both ways).
        func apply(to image: MagickImage) throws -> (Data, ImageFormat) {
            let copy = image.clone()
            switch self {
            case .jpeg30, .jpeg60, .jpeg82, .jpeg95:
                copy.outputFormat = .jpeg
                copy.outputQuality = Int(rawValue.dropFirst(4))!
            case .webp75:
                copy.outputFormat = .webp
                copy.outputQuality = 75
            case .blur:
                try copy.blur(sigma: 1.5)
                copy.outputFormat = .png
            case .resize:
                try copy.resize(width: image.width / 2, height: image.height / 2)
                try copy.resize(width: image.width, height: image.height)
                copy.outputFormat = .png
            }
            return (try copy.encode(), copy.outputFormat)
        }
    }

    static func file(_ path: String) -> () throws -> MagickImage {
        {
            let url = path.hasPrefix("screenshots/") ? Self.fixtures.appendingPathComponent(path) : publicFixture(path)
            let data = try Data(contentsOf: url)
            return try MagickImage.decode(data, format: try #require(ImageFormat.sniff(data)), firstFrameOnly: true)
        }
    }

    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures")

    /// A smooth diagonal gradient through every hue, 320×240.
    static func gradient() throws -> MagickImage {
        let (w, h) = (320, 240)
        var px = [UInt8](repeating: 0, count: w * h * 3)
        for y in 0..<h {
            for x in 0..<w {
                let t = Double(x + y) / Double(w + h - 2)
                px[(y * w + x) * 3] = UInt8(255 * t)
                px[(y * w + x) * 3 + 1] = UInt8(255 * Double(y) / Double(h - 1))
                px[(y * w + x) * 3 + 2] = UInt8(255 * (1 - Double(x) / Double(w - 1)))
            }
        }
        let png = try SampleImages.encode(pixels: px, width: w, height: h, alpha: false, format: .png, quality: 95)
        return try MagickImage.decode(png, format: .png)
    }

    /// 17 images, most cropped to 256 px (the port takes 1–2 s for an 800-px pair): each at
    /// least 225 px a side, below which the port takes one scale fewer than libjxl.
    static var corpus: [Case] {
        [
            // Photographs (Tests/Fixtures/public/photos), two of them whole.
            Case(name: "astronaut", image: file("photos/astronaut.jpg"), crop: (256, 256, 128, 40)),
            Case(name: "camera (grey)", image: file("photos/camera.jpg"), crop: (256, 256, 150, 60)),
            Case(name: "coffee (whole)", image: file("photos/coffee.jpg"), distortions: [.jpeg60, .jpeg82, .webp75]),
            Case(name: "rocket", image: file("photos/rocket.jpg"), crop: (256, 256, 200, 150)),
            Case(name: "hubble", image: file("photos/hubble-deep-field.jpg"), crop: (256, 256, 300, 200)),
            Case(name: "dog", image: file("photos/dog.jpg"), crop: (256, 256, 170, 260)),
            Case(name: "weld (whole)", image: file("photos/weld.jpg"), distortions: [.jpeg60, .jpeg82, .webp75]),
            Case(name: "fruits", image: file("photos/fruits.jpg"), crop: (256, 256, 250, 120)),
            Case(name: "seine", image: file("photos/seine.jpg"), crop: (256, 256, 72, 22)),
            Case(name: "tiger", image: file("photos/tiger.jpg"), crop: (256, 256, 300, 150)),
            // A screenshot: text, code on grey, a bar and a button.
            Case(name: "screenshot", image: file("screenshots/docs-architecture.png"), crop: (320, 256, 0, 0)),
            // Flat graphics.
            Case(name: "PngSuite logo", image: file("pngsuite/PngSuite.png")),
            Case(name: "webp patterns", image: file("libwebp/lossless_color_transform.webp"), crop: (256, 256, 128, 64)),
            // Gradients: smooth, in 16 grey levels, and libpng's ramps.
            Case(name: "gradient", image: gradient),
            Case(name: "4-bit grey ramp", image: file("image-webp/regression/lossless_indexed_4bit_palette.webp"), crop: (256, 256, 120, 22)),
            Case(name: "libpng ramps", image: file("libpng/testpngs/rgb-8.png")),
            // Alpha: libpng's ramps under an alpha ramp (JPEG flattens it onto white).
            Case(name: "libpng alpha", image: file("libpng/testpngs/rgb-alpha-8.png")),
        ]
    }

    /// The PyPI port over pairs of raw 8-bit files, in parallel (one process a core). A reference
    /// with alpha is blended over 0.1 and 0.9 and the worse score kept, a distorted image with
    /// alpha over the same background (0.5 beside an opaque reference), as libjxl's tool does;
    /// the port itself reads RGB only.
    static let oracle = """
        import io, json, os, sys
        import numpy as np
        from PIL import Image
        from ssimulacra2 import compute_ssimulacra2

        def png(path, w, h, channels, bg):
            a = np.fromfile(path, np.uint8).reshape(h, w, channels).astype(np.float64)
            if channels == 4:
                alpha = a[..., 3:] / 255.0
                a = np.round((a[..., :3] / 255.0 * alpha + (1.0 - alpha) * bg) * 255.0)
            buf = io.BytesIO()
            Image.fromarray(a.astype(np.uint8), 'RGB').save(buf, 'PNG')
            buf.seek(0)
            return buf

        def score(p):
            backgrounds = (0.1, 0.9) if p['refChannels'] == 4 else (0.5,)
            return min(compute_ssimulacra2(png(p['ref'], p['width'], p['height'], p['refChannels'], bg),
                                           png(p['dist'], p['width'], p['height'], p['distChannels'], bg)) for bg in backgrounds)

        if __name__ == '__main__':
            # One process, in order: a pool whose worker dies leaves its parent waiting for ever.
            pairs = json.load(open(sys.argv[1]))
            print(json.dumps([score(p) for p in pairs]))
        """

    struct Pair: Encodable {
        var ref: String
        var dist: String
        var width: Int
        var height: Int
        var refChannels: Int
        var distChannels: Int
    }

    @Test(.enabled(if: hasReference, "needs scripts/test's HALCYON_TEST_PYTHON"))
    func agreesWithThePythonPortWithinAFifthOfAPoint() throws {
        let dir = try TestEnvironment.temporaryDirectory("ssimulacra2")
        var pairs: [Pair] = [], rows: [(name: String, distortion: Distortion, ours: Double)] = []
        for (i, c) in Self.corpus.enumerated() {
            let image = try c.image()
            if let (w, h, x, y) = c.crop { try image.crop(width: w, height: h, x: x, y: y) }
            let reference = try SSIMULACRA2Reference(image)
            let refFile = dir.appendingPathComponent("\(i).raw")
            let ref = try image.firstFrameSamples8(for: "test")
            try Data(ref.pixels).write(to: refFile)
            for d in c.distortions {
                let (data, format) = try d.apply(to: image)
                let distorted = try MagickImage.decode(data, format: format, firstFrameOnly: true).firstFrameSamples8(for: "test")
                let distFile = dir.appendingPathComponent("\(i)-\(d.rawValue).raw")
                try Data(distorted.pixels).write(to: distFile)
                pairs.append(
                    Pair(
                        ref: refFile.path, dist: distFile.path, width: ref.width, height: ref.height, refChannels: ref.channels,
                        distChannels: distorted.channels))
                rows.append((c.name, d, try reference.score(encoded: data, format: format)))
            }
        }
        let manifest = dir.appendingPathComponent("pairs.json")
        try JSONEncoder().encode(pairs).write(to: manifest)
        let python = try referencePython(Self.oracle, [manifest.path])
        let theirs = try JSONDecoder().decode([Double].self, from: Data(python.utf8))
        try #require(theirs.count == rows.count)

        var worst = 0.0
        var table = "SSIMULACRA2, ours against PyPI ssimulacra2 0.3.0:\n"
        for (row, python) in zip(rows, theirs) {
            let difference = row.ours - python
            worst = max(worst, abs(difference))
            table +=
                "  \(row.name.padding(toLength: 18, withPad: " ", startingAt: 0)) \(row.distortion.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0))"
            table += " ours \(String(format: "%8.3f", row.ours))  python \(String(format: "%8.3f", python))  \(String(format: "%+.3f", difference))\n"
            #expect(abs(difference) <= 0.2, "\(row.name), \(row.distortion): ours \(row.ours), python \(python)")
        }
        table += "  \(rows.count) pairs, max |ours - python| = \(String(format: "%.3f", worst))"
        print(table)
    }

    // MARK: - Without the port

    static func photo() throws -> MagickImage {
        let image = try file("photos/coffee.jpg")()
        try image.crop(width: 320, height: 256, x: 120, y: 60)
        return image
    }

    @Test func identicalImagesScore100() throws {
        let image = try Self.photo()
        #expect(try SSIMULACRA2Reference(image).score(image) == 100)
        // With alpha (the dark and the light background), and with pixels decoded from a PNG.
        let alpha = try Self.file("libpng/testpngs/rgb-alpha-8.png")()
        #expect(alpha.hasAlpha)
        #expect(try SSIMULACRA2Reference(alpha).score(alpha) == 100)
        let png = image.clone()
        png.outputFormat = .png
        #expect(try SSIMULACRA2Reference(image).score(encoded: try png.encode(), format: .png) == 100)
    }

    @Test func scoresFallAsJPEGQualityFalls() throws {
        let image = try Self.photo()
        let reference = try SSIMULACRA2Reference(image)
        var scores: [Double] = []
        for quality in [95, 82, 60, 30, 10] {
            let copy = image.clone()
            copy.outputFormat = .jpeg
            copy.outputQuality = quality
            scores.append(try reference.score(encoded: try copy.encode(), format: .jpeg))
        }
        #expect(scores == scores.sorted(by: >), "\(scores)")
        #expect(scores[0] > 80 && scores[0] < 100, "quality 95: \(scores[0])")
        #expect(scores[4] < 40, "quality 10: \(scores[4])")
    }

    /// Concurrent scores against one reference (it is only read) give what one thread gives.
    @Test func oneReferenceScoresOnManyThreadsAtOnce() throws {
        let image = try Self.photo()
        let reference = try SSIMULACRA2Reference(image)
        let copy = image.clone()
        copy.outputFormat = .webp
        copy.outputQuality = 60
        let webp = try copy.encode()
        let alone = try reference.score(encoded: webp, format: .webp)
        let results = Mutex([Double]())
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            let s = try? reference.score(encoded: webp, format: .webp)
            results.withLock { $0.append(s ?? .nan) }
        }
        #expect(results.withLock { $0 } == [alone, alone, alone, alone])
    }

    /// Under 8×8 is `image.too_small_to_score` (the caller skips scoring), 8×8 scores; another
    /// size than the reference's is `image.processing_failed`.
    @Test func sizesItCannotScore() throws {
        #expect(!SSIMULACRA2Reference.canScore(width: 7, height: 100))
        #expect(SSIMULACRA2Reference.canScore(width: 8, height: 8))
        let tiny = [UInt8](repeating: 128, count: 7 * 8 * 3)
        #expect(throws: HalcyonError.self) { _ = try SSIMULACRA2Reference(pixels: tiny, width: 7, height: 8, channels: 3) }
        do {
            _ = try SSIMULACRA2Reference(pixels: tiny, width: 8, height: 7, channels: 3)
            Issue.record("a 8x7 reference was prepared")
        } catch {
            #expect(error.code == .tooSmallToScore, "\(error)")
        }
        let eight = (0..<(8 * 8 * 3)).map { UInt8($0 % 251) }
        let reference = try SSIMULACRA2Reference(pixels: eight, width: 8, height: 8, channels: 3)
        #expect(try reference.score(pixels: eight, width: 8, height: 8, channels: 3) == 100)
        do {
            _ = try reference.score(pixels: eight + eight, width: 8, height: 16, channels: 3)
            Issue.record("an 8x16 image was scored against an 8x8 reference")
        } catch {
            #expect(error.code == .processingFailed && error.message.contains("8x16"), "\(error)")
        }
    }

    /// What a reference holds is what `estimatedBytes` says beforehand: 48 bytes a pixel, twice
    /// that with transparency (an opaque alpha channel counts as none).
    @Test func memoryIsWhatTheEstimateSays() throws {
        let image = try Self.photo()
        let reference = try SSIMULACRA2Reference(image)
        #expect(reference.bytes <= SSIMULACRA2Reference.estimatedBytes(width: 320, height: 256, alpha: false))
        #expect(reference.bytes >= 47 * 320 * 256, "\(reference.bytes)")
        let alpha = try Self.file("libpng/testpngs/rgb-alpha-8.png")()
        let transparent = try SSIMULACRA2Reference(alpha)
        #expect(transparent.bytes <= SSIMULACRA2Reference.estimatedBytes(width: 256, height: 256, alpha: true))
        #expect(transparent.bytes >= 95 * 256 * 256, "\(transparent.bytes)")
    }
}
