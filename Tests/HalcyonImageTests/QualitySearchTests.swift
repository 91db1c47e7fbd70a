import Foundation
import HalcyonChain
import HalcyonDomain
import Testing

@testable import HalcyonImage

/// `format(…, quality=auto)` and `format(auto)`: the search on known curves (the grammar's side
/// is HalcyonChainTests' `FormatStepTests`).
@Suite struct QualitySearchTests {
    /// A smooth curve like a JPEG's: score = 100 − 60·e^(−q/30).
    static func curve(_ q: Int) -> Double { 100 - 60 * exp(-Double(q) / 30) }
    /// An encode of quality q: q·100 bytes, scoring `curve(q)`.
    static func encode(_ q: Int) -> Data { Data(count: q * 100) }
    static func score(_ data: Data) -> Double { curve(data.count / 100) }
    static func probe(_ q: Int) -> Probe { Probe(quality: q, data: encode(q), score: curve(q)) }

    /// Whatever the target and the start, the search reaches the target at (or within the
    /// tolerance of) its lowest quality, in at most six encodes.
    @Test func theSearchFindsTheLowestQualityInSixEncodes() throws {
        var worst = 0
        for target in stride(from: 50.0, through: 98.0, by: 1.5) {
            for start in [10, 40, 82, 100] {
                let search = QualitySearch(target: target, range: 10...100, slope: 0.45)
                let outcome = try search.run(start: start, encode: Self.encode, score: Self.score)
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
        let outcome = try QualitySearch(target: 99, range: 10...100, slope: 0.45).run(start: 82, encode: Self.encode, score: Self.score)
        #expect(outcome.reached == nil && outcome.probes.count <= 3 && (outcome.best?.score ?? 0) > Self.curve(100) - 1)
        // A score that stops rising (noise: about 30 whatever the quality) is given up on at the
        // second miss, not chased to quality 100 in six encodes.
        var noisy: [Int] = []
        let flat = try QualitySearch(target: 95, range: 10...100, slope: 2).run(
            start: 60,
            encode: { q throws(HalcyonError) in
                noisy.append(q)
                return Data(count: q)
            }, score: { data throws(HalcyonError) in 28 + Double(data.count) / 100 })
        #expect(flat.gaveUp && flat.reached == nil && noisy.count == 2 && noisy.last! < 100, "\(noisy)")
        // Two misses close together are an encoder's wobble, not a verdict.
        #expect(!QualitySearch(target: 80, range: 10...100, slope: 0.45).outOfReach([Self.probe(60), Self.probe(62)]))
        var calls = 0
        let abandoned = try QualitySearch(target: 90, range: 10...100, slope: 0.45, abandonAt: 2000).run(
            start: 30, encode: Self.encode,
            score: { data throws(HalcyonError) in
                calls += 1
                return Self.score(data)
            })
        #expect(abandoned.abandoned && calls == 1)
    }

    /// The last encode a search may make is not scored when it is already as large as the result
    /// it would have to beat (the one 4:2:0 try of a JPEG search): it cannot win. An earlier one
    /// is scored, since a lower quality may follow it; a smaller last one is scored too.
    @Test func aLastEncodeThatCannotWinIsNotScored() throws {
        var scored: [Int] = []
        let score = { (data: Data) throws(HalcyonError) -> Double in
            scored.append(data.count / 100)
            return Self.score(data)
        }
        let last = try QualitySearch(target: 80, range: 10...100, maxEncodes: 1, slope: 0.45, abandonAt: 5000, chroma: .half).run(
            start: 60, encode: Self.encode, score: score)
        #expect(last.abandoned && last.reached == nil && scored.isEmpty)
        #expect(last.probes.count == 1 && last.probes[0].score == Probe.unscored && last.probes[0].chroma == .half)
        #expect(last.best?.score == Probe.unscored)
        // The same encode, smaller than what it must beat: scored, and it reaches.
        let smaller = try QualitySearch(target: 80, range: 10...100, maxEncodes: 1, slope: 0.45, abandonAt: 7000).run(
            start: 60, encode: Self.encode, score: score)
        #expect(scored == [60] && smaller.reached?.quality == 60 && !smaller.abandoned)
        // Not the last allowed: scored (it reaches, so the search goes on down and finds a
        // smaller encode that still reaches).
        scored = []
        let first = try QualitySearch(target: 80, range: 10...100, slope: 0.45, abandonAt: 5000).run(
            start: 60, encode: Self.encode, score: score)
        #expect(scored.first == 60 && (first.reached?.quality ?? 100) < 50)
    }

    /// Scores that dip (a real encoder's do, by a point here and there) still end in a result
    /// that reaches the target.
    @Test func aBumpyCurveStillEndsAboveTheTarget() throws {
        for seed in 0..<20 {
            var rng = SystemRandomNumberGenerator()
            let noise = (0...100).map { _ in Double.random(in: -0.8...0.8, using: &rng) }
            let outcome = try QualitySearch(target: 85, range: 10...100, slope: 0.45).run(
                start: 70 + seed, encode: { q throws(HalcyonError) in Data(count: q) },
                score: { data throws(HalcyonError) in Self.curve(data.count) + noise[data.count] })
            #expect(outcome.probes.count <= 6)
            #expect((outcome.reached?.score ?? 0) >= 85)
        }
    }

    /// Where one whole JPEG step carries the score past the target by more than a point (a noisy
    /// picture's can by five), an encoder with half qualities tries the half between, and the
    /// output says so; without them the search ends on the whole step above.
    @Test(arguments: [true, false])
    func aWholeStepThatOvershootsIsHalved(halves: Bool) throws {
        // An encode of n half qualities is n bytes; the score jumps between 92 (83) and 93 (88),
        // 92.5 scoring 85.2.
        struct Scorer: OutputScorer {
            func score(encoded: Data, format: ImageFormat) throws(HalcyonError) -> Double {
                let n = encoded.count
                return n <= 184 ? 83 - Double(184 - n) * 0.125 : n == 185 ? 85.2 : 88 + Double(n - 186) * 0.05
            }
            var hasTransparency: Bool { false }
        }
        var encoded: [Encoding] = []
        let encoder = OutputEncoder(
            step: try ProcessorChain.parse("format(jpeg, quality=auto, min_score=84.7)").formatStep, format: .jpeg, quality: 82,
            predictionKey: "halves \(halves) \(UUID())", halfQualities: halves,
            encode: { e throws(HalcyonError) in
                encoded.append(e)
                // 4:2:0 a third larger: never the smaller.
                return Data(count: (2 * e.quality + (e.half ? 1 : 0)) * (e.chroma == .half ? 4 : 3) / 3)
            },
            makeScorer: { Scorer() })
        let out = try encoder.run()
        let tried = encoded.filter { $0.chroma == .full }.map { Double($0.quality) + ($0.half ? 0.5 : 0) }
        #expect(
            out.quality == (halves ? 92 : 93) && out.half == halves && (out.score ?? 0) >= 84.7, "\(out.quality ?? 0) \(out.half), tried \(tried)")
        #expect(out.data.count == (halves ? 185 : 186))
        #expect(halves == tried.contains { $0.rounded() != $0 }, "half qualities only where the encoder has them: \(tried)")
        #expect(out.encodes <= QualitySearch.defaultMaxEncodes + OutputEncoder.halfChromaEncodes)
    }
}
