import Foundation
import HalcyonDomain
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// PDQ (`PerceptualHash`, in C in `Sources/CPerceptual/pdq.c`) against Meta's own C++ through the
/// PyPI `pdqhash` package (0.2.8; `scripts/test` installs it), on ThreatExchange's PDQ test
/// images, the suite's public photographs and transformed copies of them.
@Suite(.cpuHeavy) struct PerceptualHashTests {
    /// 8-bit RGB pixels, rows packed.
    struct Pixels {
        var width: Int
        var height: Int
        var rgb: [UInt8]

        init(width: Int, height: Int, rgb: [UInt8]) {
            (self.width, self.height, self.rgb) = (width, height, rgb)
        }

        init(_ data: Data) throws {
            let format = try #require(ImageFormat.sniff(data))
            let frame = try MagickImage.decode(data, format: format).firstFrameSamples8(for: "test")
            width = frame.width
            height = frame.height
            rgb = frame.channels == 3 ? frame.pixels : Self.dropAlpha(frame.pixels)
        }

        static func dropAlpha(_ rgba: [UInt8]) -> [UInt8] {
            var rgb: [UInt8] = []
            rgb.reserveCapacity(rgba.count / 4 * 3)
            for (i, v) in rgba.enumerated() where i % 4 != 3 { rgb.append(v) }
            return rgb
        }

        func hashes(variants: Int = 1) throws -> [PerceptualHash] {
            try #require(
                try rgb.withUnsafeBufferPointer { b in
                    try PerceptualHash.compute(b.baseAddress!, width: width, height: height, stride: width * 3, channels: 3, variants: variants)
                })
        }

        func png() throws -> Data { try SampleImages.encode(pixels: rgb, width: width, height: height, alpha: false, format: .png, quality: 100) }

        // MARK: The transforms the issue names

        func mirrored() -> Pixels {
            var out = rgb
            for y in 0..<height {
                for x in 0..<width {
                    for c in 0..<3 { out[(y * width + x) * 3 + c] = rgb[(y * width + width - 1 - x) * 3 + c] }
                }
            }
            return Pixels(width: width, height: height, rgb: out)
        }

        /// A quarter turn clockwise.
        func rotated() -> Pixels {
            var out = rgb
            for y in 0..<height {
                for x in 0..<width {
                    let (nx, ny) = (height - 1 - y, x)
                    for c in 0..<3 { out[(ny * height + nx) * 3 + c] = rgb[(y * width + x) * 3 + c] }
                }
            }
            return Pixels(width: height, height: width, rgb: out)
        }

        func grey() -> Pixels {
            var out = rgb
            for i in 0..<(width * height) {
                let y = (299 * Int(rgb[i * 3]) + 587 * Int(rgb[i * 3 + 1]) + 114 * Int(rgb[i * 3 + 2]) + 500) / 1000
                for c in 0..<3 { out[i * 3 + c] = UInt8(y) }
            }
            return Pixels(width: width, height: height, rgb: out)
        }

        /// 2.5 % off each side (5 % of each dimension).
        func cropped() -> Pixels {
            let dx = width / 40, dy = height / 40, w = width - 2 * dx, h = height - 2 * dy
            var out = [UInt8](repeating: 0, count: w * h * 3)
            for y in 0..<h { for x in 0..<(w * 3) { out[y * w * 3 + x] = rgb[(y + dy) * width * 3 + dx * 3 + x] } }
            return Pixels(width: w, height: h, rgb: out)
        }

        func watermarked() -> Pixels {
            Pixels(width: width, height: height, rgb: SampleImages.captioned(rgb, width: width, height: height))
        }

        func resizedToHalf() throws -> Pixels {
            let out = try ImagePipeline.run(
                try png(), format: .png, chain: ProcessorChain.parse("resize(\(width / 2)x\(height / 2), mode=fit) |> format(png)"))
            return try Pixels(out.data)
        }

        func reencoded() throws -> Pixels {
            try Pixels(try SampleImages.encode(pixels: rgb, width: width, height: height, alpha: false, format: .jpeg, quality: 30))
        }
    }

    /// Meta's hashes of PNG files: each `[hash, quality, [8 dihedral hashes]]`.
    static func reference(_ pngs: [Data]) throws -> [(hash: String, quality: Int, dihedral: [String])] {
        let dir = try TestEnvironment.temporaryDirectory("pdq")
        var paths: [String] = []
        for (i, png) in pngs.enumerated() {
            let path = dir.appendingPathComponent("\(i).png").path
            try png.write(to: URL(fileURLWithPath: path))
            paths.append(path)
        }
        let script = """
            import json, sys, numpy, pdqhash
            from PIL import Image
            def hexof(v): return ''.join('%x' % int(''.join(str(b) for b in v[i:i + 4]), 2) for i in range(0, 256, 4))
            out = []
            for path in sys.argv[1:]:
                pixels = numpy.asarray(Image.open(path).convert('RGB'))
                h, q = pdqhash.compute(pixels)
                d, _ = pdqhash.compute_dihedral(pixels)
                out.append([hexof(h), int(q), [hexof(x) for x in d]])
            print(json.dumps(out))
            """
        let text = try referencePython(script, paths)
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[Any]])
        return try rows.map { r in
            (try #require(r[0] as? String), try #require(r[1] as? Int), try #require(r[2] as? [String]))
        }
    }

    static func fixture(_ name: String) throws -> Data { try Data(contentsOf: publicFixture("../pdq/\(name)")) }

    static let threatExchange = [
        "aaa-orig.jpg", "blur-a-lot.jpg", "high-contrast.jpg", "shrink-a-lot.jpg", "square-256x256.jpg", "bridge-2-rotate-90.jpg",
        "bridge-5-flipx.jpg", "bridge-7-flip-plus-1.jpg", "q0003.jpg", "q0122.jpg", "q0291.jpg", "q0746.jpg", "q1050.jpg", "q2821.jpg",
        "wee.jpg", "small.jpg",
    ]
    static let photos = ["astronaut", "camera", "chelsea", "coffee", "dog", "fox", "fruits", "paris", "retina", "rocket", "tiger", "weld"]

    /// Every hash within 10 bits of Meta's where Meta's quality is at least 80 (its own bar for a
    /// correct implementation), the quality within 5, on the same pixels, whole at every size as
    /// the reference hashes them; and the eight dihedral hashes of each original within 10 bits
    /// of Meta's too.
    @Test func hashesAreWithinTenBitsOfMetasOwn() throws {
        var cases: [(name: String, pixels: Pixels)] = []
        for name in Self.threatExchange { cases.append((name, try Pixels(try Self.fixture(name)))) }
        for name in Self.photos {
            let p = try Pixels(try Data(contentsOf: publicFixture("photos/\(name).jpg")))
            cases += [
                (name, p), ("\(name) resized", try p.resizedToHalf()), ("\(name) q30", try p.reencoded()), ("\(name) cropped", p.cropped()),
                ("\(name) rotated", p.rotated()), ("\(name) mirrored", p.mirrored()), ("\(name) grey", p.grey()),
                ("\(name) watermarked", p.watermarked()),
            ]
        }
        let theirs = try Self.reference(try cases.map { try $0.pixels.png() })
        var worst = 0, exact = 0, table = "PDQ, ours against pdqhash (Meta's C++):\n"
        for (c, ref) in zip(cases, theirs) {
            let ours = try c.pixels.hashes(variants: 8)
            let distance = try #require(PerceptualHash.distance(ours[0].hex, ref.hash))
            table += "  \(c.name.padding(toLength: 24, withPad: " ", startingAt: 0)) \(c.pixels.width)x\(c.pixels.height)"
            table += " quality \(ours[0].quality)/\(ref.quality) distance \(distance)\n"
            #expect(abs(ours[0].quality - ref.quality) <= 5, "\(c.name): quality \(ours[0].quality), Meta's \(ref.quality)")
            guard ref.quality >= 80 else { continue }
            worst = max(worst, distance)
            if distance == 0 { exact += 1 }
            #expect(distance <= 10, "\(c.name): \(distance) bits from Meta's hash")
            let dihedral = zip(ours, ref.dihedral).map { PerceptualHash.distance($0.hex, $1) ?? 256 }
            table += "    dihedral distances \(dihedral)\n"
            for (v, d) in zip(PerceptualHash.Variant.allCases, dihedral) { #expect(d <= 10, "\(c.name) \(v): dihedral hash \(d) bits away") }
            // The same filter summed another way: the same bits, but for a coefficient on the
            // median (Meta's luma is NumPy's, in double).
            #expect(distance <= 2, "\(c.name): \(distance) bits")
        }
        print(table + "  worst \(worst) bits; \(exact) of \(cases.count) identical")
        #expect(cases.count == Self.threatExchange.count + 8 * Self.photos.count)
    }

    /// The dihedral hashes of an image are the hashes of its turned and mirrored copies: the
    /// original's variants match the copies' own hashes (ThreatExchange's turned bridges, and a
    /// photograph turned here), and unrelated photographs are far.
    @Test func dihedralVariantsMatchTheTurnedCopies() throws {
        let bridge = try Pixels(try Self.fixture("aaa-orig.jpg")).hashes(variants: 8)
        for (file, variant) in [
            ("bridge-2-rotate-90.jpg", PerceptualHash.Variant.rotate90), ("bridge-5-flipx.jpg", .flipX), ("bridge-7-flip-plus-1.jpg", .flipPlus1),
        ] {
            let turned = try Pixels(try Self.fixture(file)).hashes()[0]
            let d = PerceptualHash.distance(bridge[variant.rawValue].hex, turned.hex) ?? 256
            #expect(d <= 10, "\(file): \(d) bits from the original's \(variant)")
        }
        let p = try Pixels(try Data(contentsOf: publicFixture("photos/fox.jpg")))
        let variants = try p.hashes(variants: 8)
        let rotated = try p.rotated().hashes()[0], mirrored = try p.mirrored().hashes()[0]
        // PDQ's rotate90 is a quarter turn anticlockwise: this clockwise one is its rotate270.
        #expect((PerceptualHash.distance(variants[PerceptualHash.Variant.rotate270.rawValue].hex, rotated.hex) ?? 256) <= 10)
        #expect((PerceptualHash.distance(variants[PerceptualHash.Variant.flipY.rawValue].hex, mirrored.hex) ?? 256) <= 10)
        #expect((PerceptualHash.distance(variants[0].hex, rotated.hex) ?? 0) > 31, "a quarter turn is another hash")
        let other = try Pixels(try Data(contentsOf: publicFixture("photos/tiger.jpg"))).hashes()[0]
        #expect((PerceptualHash.distance(variants[0].hex, other.hex) ?? 0) > 64, "unrelated photographs are far apart")
    }

    /// The blur's weights at the edges of its range — sides from 5 (no blur) to 3,000 against 6,
    /// a window of one row, odd sizes — and the ImageMagick lane's hash, read out a band of rows
    /// at a time: the same hash as the same pixels in memory, and the reference's (quality within
    /// 5; within 2 bits where its quality is at least 80).
    @Test func oddSizesAndBandsHashAsTheReference() throws {
        let sizes = [(5, 5), (127, 9), (9, 127), (64, 64), (129, 257), (3000, 6), (6, 3000), (1500, 1100)]
        var cases: [(name: String, png: Data, pixels: Pixels)] = []
        for (i, (w, h)) in sizes.enumerated() {
            let png = try SampleImages.photo(width: w, height: h, seed: UInt64(40 + i), format: .png)
            cases.append(("\(w)x\(h)", png, try Pixels(png)))
        }
        let theirs = try Self.reference(cases.map(\.png))
        for (c, ref) in zip(cases, theirs) {
            let ours = try c.pixels.hashes(variants: 8)
            let image = try MagickImage.decode(c.png, format: .png)
            let banded = try #require(try PerceptualHash.compute(image, variants: 8))
            #expect(banded == ours, "\(c.name): the ImageMagick lane's hash differs from the same pixels'")
            #expect(abs(ours[0].quality - ref.quality) <= 5, "\(c.name): quality \(ours[0].quality), Meta's \(ref.quality)")
            let distance = try #require(PerceptualHash.distance(ours[0].hex, ref.hash))
            if ref.quality >= 80 { #expect(distance <= 2, "\(c.name): \(distance) bits from Meta's hash") }
        }
    }

    @Test func smallAndInvalidInputs() throws {
        let tiny = [UInt8](repeating: 128, count: 4 * 4 * 3)
        let none = try tiny.withUnsafeBufferPointer { b in
            try PerceptualHash.compute(b.baseAddress!, width: 4, height: 4, stride: 12, channels: 3)
        }
        #expect(none == nil, "under 5 pixels a side: no hash")
        #expect(throws: HalcyonError.self) {
            _ = try tiny.withUnsafeBufferPointer { b in try PerceptualHash.compute(b.baseAddress!, width: 4, height: 4, stride: 2, channels: 3) }
        }
        // A flat image: a hash of quality 0.
        let flat = [UInt8](repeating: 90, count: 64 * 64 * 3)
        let hash = try #require(
            try flat.withUnsafeBufferPointer { b in try PerceptualHash.compute(b.baseAddress!, width: 64, height: 64, stride: 192, channels: 3) })
        #expect(hash[0].quality == 0 && hash[0].hex.count == 64)
        #expect(PerceptualHash.distance("zz", hash[0].hex) == nil && PerceptualHash.distance(hash[0].hex, hash[0].hex) == 0)
    }
}
