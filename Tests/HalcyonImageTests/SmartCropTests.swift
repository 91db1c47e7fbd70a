import Foundation
import HalcyonDomain
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// Gravity for fills and crops: compass anchors, focal points, and windows judged from the
/// pixels, on images built so that the right answer is known.
@Suite(.cpuHeavy) struct SmartCropTests {
    /// Flat grey `width`×`height` with a patch of `patch` (x, y, size) filled by `paint`.
    static func image(
        _ width: Int, _ height: Int, patch: (x: Int, y: Int, size: Int), seed: UInt64 = 1, paint: (inout FuzzRandom) -> [UInt8]
    )
        throws -> Data
    {
        var random = FuzzRandom(seed: seed)
        var pixels = [UInt8](repeating: 128, count: width * height * 3)
        for y in patch.y..<(patch.y + patch.size) {
            for x in patch.x..<(patch.x + patch.size) {
                let c = paint(&random)
                for k in 0..<3 { pixels[(y * width + x) * 3 + k] = c[k] }
            }
        }
        return try SampleImages.encode(pixels: pixels, width: width, height: height, alpha: false, format: .png, quality: 95)
    }

    static func noise(_ r: inout FuzzRandom) -> [UInt8] { let v = UInt8(r.below(256)); return [v, v, v] }

    /// How many columns and rows of `image` hold varied (non-flat) pixels.
    func detail(_ image: MagickImage) -> (columns: Int, rows: Int) {
        var columns = Set<Int>(), rows = Set<Int>()
        for y in stride(from: 0, to: image.height, by: 1) {
            for x in 0..<image.width {
                let p = image.pixel(x: x, y: y)
                if abs(p.red - 0.5) > 0.08 || abs(p.green - 0.5) > 0.08 || abs(p.blue - 0.5) > 0.08 {
                    columns.insert(x)
                    rows.insert(y)
                }
            }
        }
        return (columns.count, rows.count)
    }

    /// A detailed square on a flat background ends up wholly inside the crop, whichever axis
    /// the fill crops along, and wherever the square is.
    @Test(arguments: [
        (600, 200, 450, 50), (600, 200, 20, 50), (200, 600, 50, 470), (200, 600, 50, 10),
    ])
    func entropyKeepsTheDetailedObject(width: Int, height: Int, x: Int, y: Int) throws {
        let png = try Self.image(width, height, patch: (x, y, 100), paint: Self.noise)
        let (_, out) = try Fixture.run(png, "resize(200x200, mode=fill, gravity=entropy) |> format(png)")
        let d = detail(out)
        #expect(d.columns >= 98 && d.rows >= 98, "the whole 100×100 patch: \(d)")
        // The centre crop would have missed it.
        let (_, centre) = try Fixture.run(png, "resize(200x200, mode=fill) |> format(png)")
        #expect(detail(centre).columns < 20)
    }

    /// Saturated colour and skin tones draw `attention` even where edges elsewhere are weak.
    @Test(arguments: [([220, 30, 40] as [UInt8], 480), ([224, 172, 138], 30)])
    func attentionFindsSaturatedAndSkinTonedRegions(colour: [UInt8], x: Int) throws {
        let png = try Self.image(600, 200, patch: (x, 60, 90)) { _ in colour }
        let (_, out) = try Fixture.run(png, "resize(200x200, mode=fill, gravity=attention) |> format(png)")
        let d = detail(out)
        #expect(d.columns >= 88 && d.rows >= 88, "the whole patch: \(d)")
    }

    @Test func cropTakesAGravityOnBothAxes() throws {
        let png = try Self.image(500, 400, patch: (380, 290, 80), paint: Self.noise)
        let (processed, out) = try Fixture.run(png, "crop(150x120, gravity=entropy) |> format(png)")
        #expect((processed.width, processed.height) == (150, 120))
        let d = detail(out)
        #expect(d.columns >= 78 && d.rows >= 78, "\(d)")
        let (_, attention) = try Fixture.run(png, "crop(150x120, gravity=attention) |> format(png)")
        #expect(detail(attention).columns >= 78)
    }

    /// A focal point sits as near the window's centre as the image allows; compass gravities
    /// pin the window to their edge.
    @Test func focalPointsAndCompassAnchors() throws {
        let png = try Fixture.halves(600, 200, left: [250, 0, 0], right: [0, 0, 250])
        func colour(_ chain: String, x: Int) throws -> (Double, Double) {
            let p = try Fixture.run(png, chain + " |> format(png)").1.pixel(x: x, y: 100)
            return (p.red, p.blue)
        }
        #expect(try colour("resize(200x200, mode=fill, gravity=east)", x: 0).1 > 0.9)
        #expect(try colour("resize(200x200, mode=fill, gravity=west)", x: 199).0 > 0.9)
        // fp(0.45): centred on x = 270, the window is 170…370: red left of 300, blue right.
        #expect(try colour("resize(200x200, mode=fill, gravity=fp(0.45,0.5))", x: 120).0 > 0.9)
        #expect(try colour("resize(200x200, mode=fill, gravity=fp(0.45,0.5))", x: 140).1 > 0.9)
        // fp(0.99) slides back inside: the rightmost 200 columns, all blue.
        #expect(try colour("resize(200x200, mode=fill, gravity=fp(0.99,0.5))", x: 0).1 > 0.9)
        #expect(try colour("crop(100x200, gravity=fp(0,0))", x: 99).0 > 0.9)
    }

    @Test func onlyGeometricGravitiesTakeTheDirectLane() throws {
        #expect(DirectLane.accepts(try ProcessorChain.parse("resize(10x10, mode=fill, gravity=north)")))
        #expect(!DirectLane.accepts(try ProcessorChain.parse("resize(10x10, mode=fill, gravity=entropy)")))
    }
}
