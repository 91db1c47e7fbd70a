import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// `watermark("SOURCE", …)`: placement, alpha, opacity, the budget, and a watermark too large for
/// the image (the grammar's side is HalcyonChainTests' `WatermarkStepTests`).
@Suite(.cpuHeavy) struct WatermarkTests {
    static let grey: Data = try! Fixture.solid(400, 300, [128, 128, 128])
    static let blue: WatermarkSource = try! WatermarkSource.check(try! Fixture.solid(100, 50, [0, 0, 250]), format: .png)

    func run(_ chain: String, marks: [String: WatermarkSource] = ["https://cdn.test/mark.png": blue]) throws -> MagickImage {
        let out = try ImagePipeline.run(Self.grey, format: .png, chains: [try ProcessorChain.parse(chain + " |> format(png)")], watermarks: marks)[0]
            .get()
        return try MagickImage.decode(out.data, format: .png)
    }

    @Test func theWatermarkIsScaledAndPlacedByGravityAndMargin() throws {
        // 0.25 of 400 = 100 wide, 50 tall; south-east, 16 px in: x 284…383, y 234…283.
        let image = try run(#"watermark("https://cdn.test/mark.png", scale=0.25, opacity=1)"#)
        #expect(image.pixel(x: 334, y: 259).blue > 0.95)
        #expect(image.pixel(x: 280, y: 259).blue < 0.6 && image.pixel(x: 334, y: 290).blue < 0.6)
        let north = try run(#"watermark("https://cdn.test/mark.png", gravity=north_west, margin=0, scale=0.25, opacity=1)"#)
        #expect(north.pixel(x: 2, y: 2).blue > 0.95 && north.pixel(x: 102, y: 2).blue < 0.6)
        // Opacity 0.5: half-way between grey and blue.
        let faint = try run(#"watermark("https://cdn.test/mark.png", scale=0.25, opacity=0.5)"#)
        #expect(near(faint.pixel(x: 334, y: 259).blue, (0.5 + 0.98) / 2, 0.06))
        #expect(near(faint.pixel(x: 334, y: 259).red, 0.25, 0.06))
    }

    @Test func theWatermarksAlphaIsRespected() throws {
        // Transparent on the left half, opaque red on the right.
        var pixels = [UInt8](repeating: 0, count: 100 * 100 * 4)
        for y in 0..<100 { for x in 50..<100 { pixels[(y * 100 + x) * 4] = 250; pixels[(y * 100 + x) * 4 + 3] = 255 } }
        let png = try SampleImages.encode(pixels: pixels, width: 100, height: 100, alpha: true, format: .png, quality: 95)
        let mark = try WatermarkSource.check(png, format: .png)
        let image = try run(#"watermark("m", gravity=center, margin=0, scale=0.25, opacity=1)"#, marks: ["m": mark])
        // The watermark spans x 150…249: its left half leaves the grey, its right half is red.
        #expect(near(image.pixel(x: 170, y: 150).red, 0.5, 0.03))
        #expect(image.pixel(x: 230, y: 150).red > 0.95)
    }

    @Test func aWatermarkThatDoesNotFitFailsWithItsOwnCode() throws {
        #expect {
            try run(#"watermark("https://cdn.test/mark.png", scale=1, margin=16)"#)
        } throws: { error in
            (error as? HalcyonError)?.code == .watermarkTooLarge
        }
        // Tall: 0.5 of 400 = 200 wide, 400 tall (a 1:2 mark) cannot fit in 300.
        let tall = try WatermarkSource.check(try Fixture.solid(50, 100, [0, 0, 0]), format: .png)
        #expect {
            try run(#"watermark("t", scale=0.5)"#, marks: ["t": tall])
        } throws: { error in
            (error as? HalcyonError)?.code == .watermarkTooLarge && "\(error)".contains("200x400")
        }
    }

    /// The mark's decode counts against the job's pixel budget with the image it is drawn on,
    /// and it is decoded for the draw, at the drawn size: a 1600×800 mark drawn 100 wide.
    @Test func theMarkCountsAgainstTheBudgetAndIsDecodedAtItsDrawnSize() throws {
        let big = try WatermarkSource.check(try Fixture.solid(1600, 800, [0, 0, 250]), format: .png)
        #expect(big.size == ImageSize(width: 1600, height: 800))
        var limits = ImageLimits()
        limits.maxPixels = 1_300_000  // the 400×300 image and the 1.28 MP mark do not fit together
        #expect {
            try ImagePipeline.run(
                Self.grey, format: .png, chains: [try ProcessorChain.parse(#"watermark("b", scale=0.25) |> format(png)"#)], limits: limits,
                watermarks: ["b": big])[0].get()
        } throws: { error in
            (error as? HalcyonError)?.code == .imageTooLarge && "\(error)".contains("with its 1600x800 watermark decoded")
        }
        let counter = ImagePipeline.DecodeCounter()
        let image = try ImagePipeline.$observer.withValue(counter) {
            try run(#"watermark("b", scale=0.25, opacity=1)"#, marks: ["b": big])
        }
        #expect(counter.count == 1, "the source's decode is the one counted; the mark's is the step's own")
        // 0.25 of 400 = 100 wide, 50 tall, south-east 16 px in.
        #expect(image.pixel(x: 334, y: 259).blue > 0.95 && image.pixel(x: 280, y: 259).blue < 0.6)
        let overlay = try big.decode(at: ImageSize(width: 100, height: 50), cancel: nil)
        #expect((overlay.width, overlay.height) == (100, 50))
    }

    @Test func aWatermarkOverTheLimitIsRefusedAtDecode() throws {
        var limits = ImageLimits()
        limits.maxPixels = 1000
        #expect {
            try WatermarkSource.check(try Fixture.solid(100, 50, [0, 0, 0]), format: .png, limits: limits)
        } throws: { error in
            (error as? HalcyonError)?.code == .imageTooLarge && "\(error)".contains("watermark")
        }
    }
}
