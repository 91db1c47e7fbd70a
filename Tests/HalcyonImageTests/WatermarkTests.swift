import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonRuntime
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// `watermark("SOURCE", …)`: the grammar's quoted strings, placement, alpha, opacity, and a
/// watermark too large for the image.
@Suite(.cpuHeavy) struct WatermarkTests {
    static let grey: Data = try! Fixture.solid(400, 300, [128, 128, 128])
    static let blue: WatermarkSource = try! WatermarkSource.check(try! Fixture.solid(100, 50, [0, 0, 250]), format: .png)

    func run(_ chain: String, marks: [String: WatermarkSource] = ["https://cdn.test/mark.png": blue]) throws -> MagickImage {
        let out = try ImagePipeline.run(Self.grey, format: .png, chains: [try ProcessorChain.parse(chain + " |> format(png)")], watermarks: marks)[0]
            .get()
        return try MagickImage.decode(out.data, format: .png)
    }

    @Test func quotedStringsParseAndPrintCanonically() throws {
        let chain = try ProcessorChain.parse(#"watermark("https://cdn.test/a \"b\" \\c.png", scale=0.25)"#)
        let mark = try #require(chain.processors.first as? WatermarkStep)
        #expect(mark.source == #"https://cdn.test/a "b" \c.png"#)
        #expect(chain.identifier == #"watermark("https://cdn.test/a \"b\" \\c.png",gravity=south_east,margin=16,scale=0.25,opacity=0.6)"#)
        #expect(try ProcessorChain.parse(chain.identifier).identifier == chain.identifier)
        #expect(chain.watermarkSources == [#"https://cdn.test/a "b" \c.png"#])
    }

    /// The longest string parses at once; a longer one is refused at its limit (the length is
    /// counted as the string is read, not re-walked per character).
    @Test func stringsAreBoundedCheaply() throws {
        let long = String(repeating: "a", count: 32768)
        let cpu = StageClock.threadCPUSeconds()
        #expect(try ProcessorChain.parse("watermark(\"data:\(long.dropFirst(5))\")").watermarkSources.first?.count == 32768)
        #expect(Fixture.chainError("watermark(\"\(long)b\")")?.contains("a string over 32768 characters") == true)
        // This thread's CPU time, which a loaded machine does not stretch: a re-walk per
        // character (half a billion steps) would take many seconds of it.
        let used = StageClock.threadCPUSeconds() - cpu
        #expect(used < 2, "\(used) s of CPU to parse two 32 KiB strings")
    }

    @Test(arguments: [
        (#"watermark("https://x/y.png)"#, "closing quote"),
        (#"watermark("a\nb")"#, #"\" or \\ in a string"#),
        ("watermark(https)", "double-quoted string"),
        (#"watermark("")"#, "double-quoted string"),
        ("watermark(scale=0.2)", "without a source"),
        (#"watermark("https://x/y.png", scale=2)"#, "from 0.01 to 1"),
        (#"watermark("https://x/y.png", gravity=attention)"#, "center|north"),
    ])
    func badWatermarksAreChainErrors(chain: String, expected: String) {
        #expect(Fixture.chainError(chain)?.contains(expected) == true, "\(Fixture.chainError(chain) ?? "no error")")
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

    /// A chain names at most four distinct watermarks; one may be drawn any number of times.
    @Test func aChainNamesABoundedNumberOfWatermarks() throws {
        let five = (1...5).map { #"watermark("https://cdn.test/\#($0).png")"# }.joined(separator: " |> ")
        #expect(Fixture.chainError(five)?.contains("at most 4 distinct watermark sources") == true, "\(Fixture.chainError(five) ?? "")")
        let many = (1...13).map { #"watermark("https://cdn.test/\#($0 % 4).png", scale=0.1)"# }.joined(separator: " |> ")
        #expect(try ProcessorChain.parse(many).watermarkSources.count == 4)
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
