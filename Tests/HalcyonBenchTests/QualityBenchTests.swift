import Foundation
import HalcyonDomain
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonBench

/// Q on two small images, without the Python reference: the target, the automatic chains and
/// the JSON keys the report promises.
@Suite(.cpuHeavy) struct QualityBenchTests {
    @Test func runsOnTwoImagesAndReportsItsKeys() throws {
        let sources = try [1, 2].map { seed in
            QualityBench.Source(
                name: "s\(seed).png", data: try SampleImages.photo(width: 160, height: 120, seed: UInt64(seed), format: .png), format: .png)
        }
        let run = try QualityBench.run(sources, python: nil, skipNote: "not in tests")
        #expect(run.names == ["s1.png", "s2.png"])
        #expect(run.fixed.keys.sorted() == QualityBench.scan && run.fixed.values.allSatisfy { $0.count == 2 })
        #expect(run.target > 0 && run.target < 100)
        #expect(run.autos.map(\.name).prefix(2) == ["jpeg auto", "auto"])
        for a in run.autos {
            #expect(a.outputs.count == 2 && a.q82.count == 2)
            #expect(a.outputs.allSatisfy { $0.encodes >= 1 && $0.bytes > 0 })
        }
        // quality=auto reaches the target it was given (ours, rounded to a tenth as the chain has it).
        #expect(run.autos[0].lowestScore >= run.target)
        let parsed = try JSONSerialization.jsonObject(with: Data(run.jsonText.utf8))
        let json = try #require(parsed as? [String: Any])
        for key in ["resize", "images", "target", "fixed", "fixed_floor_quality", "reference_skipped", "auto", "oracle", "ratios"] {
            #expect(json[key] != nil, "\(key)")
        }
        #expect(json["reference_skipped"] as? String == "not in tests")
        let ratios = try #require(json["ratios"] as? [String: Any])
        for key in ["jpeg_auto_bytes_vs_oracle", "jpeg_auto_cpu_vs_q82", "auto_bytes_vs_jpeg_auto", "auto_cpu_vs_q82"] {
            #expect(ratios[key] != nil, "\(key)")
        }
        // The oracle: per image the smallest JPEG reaching T. quality=auto's result is one of the
        // encodes it tries, so it cannot be smaller (2 % of slack: the oracle takes the first
        // quality that reaches, and bytes may dip by a few from one quality to the next).
        #expect(run.oracles.count == 2 && run.oracles.allSatisfy { $0 != nil })
        for (o, out) in zip(run.oracles, run.autos[0].outputs) {
            let oracle = try #require(o)
            #expect(Double(out.bytes) >= 0.98 * Double(oracle.bytes), "\(out.bytes) bytes, the oracle \(oracle.bytes) at q\(oracle.quality)")
        }
        let first = try #require((json["auto"] as? [[String: Any]])?.first)
        for key in ["total_bytes", "lowest_score", "highest_score", "encodes_median", "cpu_ms_per_job", "q82_wall_ms_per_job", "format_counts"] {
            #expect(first[key] != nil, "\(key)")
        }
        #expect(run.table.contains("jpeg auto bytes / the per-image oracle's") && run.table.contains("oracle q"))
    }
}
