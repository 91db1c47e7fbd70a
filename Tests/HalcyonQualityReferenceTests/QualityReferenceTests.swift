import Foundation
import HalcyonDomain
import HalcyonImage
import HalcyonQualityReference
import HalcyonSamples
import HalcyonTestSupport
import Testing

/// The bench's quality yardstick: PSNR against a full-decode Lanczos fill.
@Suite(.cpuHeavy) struct QualityReferenceTests {
    @Test func betterOutputsScoreHigher() throws {
        let source = try SampleImages.photo(width: 960, height: 540, seed: 5, format: .png)
        let reference = try QualityReference.fill(source, format: .png, width: 160, height: 160)
        #expect(reference.count == 160 * 160 * 3)
        // Our own pipeline's fill at two JPEG qualities: the better one must be closer.
        func made(quality: Int) throws -> Data {
            let chain = try ProcessorChain.parse("resize(160x160, mode=fill) |> format(jpeg, quality=\(quality))")
            return try ImagePipeline.run(source, format: .png, chain: chain).data
        }
        let good = try #require(QualityReference.psnr(try made(quality: 95), format: .jpeg, against: reference))
        let poor = try #require(QualityReference.psnr(try made(quality: 20), format: .jpeg, against: reference))
        #expect(good > 35, "q95: \(good) dB")
        #expect(poor < good - 3, "q20: \(poor) dB against q95: \(good) dB")
        // A different size is no score at all.
        let small = try ImagePipeline.run(source, format: .png, chain: try ProcessorChain.parse("resize(80x80, mode=fill) |> format(jpeg)")).data
        #expect(QualityReference.psnr(small, format: .jpeg, against: reference) == nil)
        #expect(QualityReference.psnr(reference, reference) == .infinity)
    }
}
