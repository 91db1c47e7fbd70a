import Foundation
import HalcyonDomain
import Testing

@testable import HalcyonImage

/// `format(…, quality=auto)` and `format(auto)`: the search on known curves (the grammar's side
/// is HalcyonChainTests' `FormatStepTests`).
@Suite struct QualitySearchTests {
    /// A smooth curve like a JPEG's: score = 100 − 60·e^(−q/30).
    static func curve(_ q: Int) -> Double { 100 - 60 * exp(-Double(q) / 30) }
    static func probe(_ q: Int) -> Probe { Probe(quality: q, data: Data(count: q * 100), score: curve(q)) }

    /// Whatever the target and the start, the search reaches the target at (or within the
    /// tolerance of) its lowest quality, in at most six encodes.
    @Test func theSearchFindsTheLowestQualityInSixEncodes() throws {
        var worst = 0
        for target in stride(from: 50.0, through: 98.0, by: 1.5) {
            for start in [10, 40, 82, 100] {
                let search = QualitySearch(target: target, range: 10...100, slope: 0.45)
                let outcome = try search.run(start: start) { q throws(HalcyonError) in Self.probe(q) }
                worst = max(worst, outcome.probes.count)
                #expect(outcome.probes.count <= 6)
                let lowest = (10...100).first { Self.curve($0) >= target }
                guard let lowest else {
                    // Out of reach: to the top of the range, or given up on once two misses said so.
                    #expect(outcome.reached == nil && (outcome.best?.quality == 100 || outcome.gaveUp), "target \(target)")
                    #expect((outcome.best?.score ?? 0) > Self.curve(100) - 2, "target \(target) start \(start)")
                    continue
                }
                #expect(!outcome.gaveUp, "target \(target) start \(start)")
                let reached = try #require(outcome.reached, "target \(target) start \(start)")
                #expect(reached.quality >= lowest)
                // Within two points of the target, or two qualities of the lowest that reaches it
                // (where the curve is flat, a quality step is a fraction of a point); three points
                // from the worst start, 100, where the curve is flattest and the answer farthest.
                #expect(
                    reached.quality - lowest <= 2 || reached.score - target <= (start == 100 ? 3 : 2),
                    "target \(target) start \(start): \(reached.quality) vs \(lowest)")
            }
        }
        #expect(worst >= 2)
    }

    /// A target no quality reaches returns the best it saw; a format that cannot beat the
    /// smallest result so far is abandoned at its first miss that is already larger.
    @Test func unreachableTargetsAndAbandonedFormats() throws {
        let outcome = try QualitySearch(target: 99, range: 10...100, slope: 0.45).run(start: 82) { q throws(HalcyonError) in Self.probe(q) }
        #expect(outcome.reached == nil && outcome.probes.count <= 3 && (outcome.best?.score ?? 0) > Self.curve(100) - 1)
        // A score that stops rising (noise: about 30 whatever the quality) is given up on at the
        // second miss, not chased to quality 100 in six encodes.
        var noisy: [Int] = []
        let flat = try QualitySearch(target: 95, range: 10...100, slope: 2).run(start: 60) { q throws(HalcyonError) in
            noisy.append(q)
            return Probe(quality: q, data: Data(count: q), score: 28 + Double(q) / 100)
        }
        #expect(flat.gaveUp && flat.reached == nil && noisy.count == 2 && noisy.last! < 100, "\(noisy)")
        // Two misses close together are an encoder's wobble, not a verdict.
        #expect(!QualitySearch(target: 80, range: 10...100, slope: 0.45).outOfReach([Self.probe(60), Self.probe(62)]))
        var calls = 0
        let abandoned = try QualitySearch(target: 90, range: 10...100, slope: 0.45, abandonAt: 2000).run(start: 30) { q throws(HalcyonError) in
            calls += 1
            return Self.probe(q)
        }
        #expect(abandoned.abandoned && calls == 1)
    }

    /// Scores that dip (a real encoder's do, by a point here and there) still end in a result
    /// that reaches the target.
    @Test func aBumpyCurveStillEndsAboveTheTarget() throws {
        for seed in 0..<20 {
            var rng = SystemRandomNumberGenerator()
            let noise = (0...100).map { _ in Double.random(in: -0.8...0.8, using: &rng) }
            let outcome = try QualitySearch(target: 85, range: 10...100, slope: 0.45).run(start: 70 + seed) { q throws(HalcyonError) in
                Probe(quality: q, data: Data(count: q), score: Self.curve(q) + noise[q])
            }
            #expect(outcome.probes.count <= 6)
            #expect((outcome.reached?.score ?? 0) >= 85)
        }
    }
}
