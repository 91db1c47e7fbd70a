import Foundation
import HalcyonDomain

/// One encoding the search tried: its quality, bytes and score (and, for JPEG, its chroma).
struct Probe: Sendable {
    var quality: Int
    /// The quality was `quality` and a half (JPEG).
    var half = false
    var data: Data
    /// `unscored` for an encode the search did not score (it could not win).
    var score: Double
    var chroma: ChromaSampling? = nil

    /// The score of an encode left unscored: below every real one, so it never counts as reaching.
    static let unscored = -Double.infinity
}

/// The lowest encoder quality whose output scores at least a target, in a bounded number of
/// encodes.
///
/// The score rises with the quality (not strictly: a step or two may dip), so the search keeps
/// a bracket — the highest quality seen to miss and the lowest seen to reach — and proposes the
/// next quality by interpolating the scores at its ends (a secant step; from one end only, the
/// expected slope). It starts from a prediction, stops as soon as a reaching encode is within
/// `tolerance` of the target or the bracket is one quality wide, and never encodes more than
/// `maxEncodes` times. It gives up early when the score stops rising: two encodes that miss,
/// whose rise carried on to the highest quality would still miss (a noise image asked for 95).
/// Its last allowed encode is not scored when it is already as large as `abandonAt`: whatever
/// its score, it cannot win and nothing follows it (the one 4:2:0 try of a JPEG search).
struct QualitySearch {
    /// The score to reach.
    var target: Double
    /// The qualities the search may use.
    var range: ClosedRange<Int>
    /// The most encodes per search.
    var maxEncodes = QualitySearch.defaultMaxEncodes
    /// A reaching encode scoring at most this far above the target ends the search: a lower
    /// quality would save little.
    var tolerance = 1.0
    /// Score points per quality step expected before two encodes measure it.
    var slope: Double
    /// Gives up (returns what it has) once a missing encode is at least this large: a larger
    /// quality would only be larger still. For `format(auto)`, the smallest output found so far.
    var abandonAt: Int?
    /// The chroma sampling every encode of this search uses (JPEG), recorded on its probes.
    var chroma: ChromaSampling? = nil
    /// How many of the search's steps make one encoder quality (2: `range` and the probes are
    /// in half qualities).
    var stepsPerQuality = 1

    static let defaultMaxEncodes = 6

    /// What the search found.
    struct Outcome {
        /// The lowest-quality encode that reached the target, if any did.
        var reached: Probe?
        /// Every encode, in the order they were made.
        var probes: [Probe]
        /// Whether it stopped because the format cannot beat `abandonAt`.
        var abandoned = false
        /// Whether it stopped because no quality in range would reach the target.
        var gaveUp = false

        /// The result: the reaching encode, else the best-scoring one.
        var best: Probe? { reached ?? probes.max { $0.score < $1.score } }

        /// The outcome of a search that moved in `steps` per quality, its probes in qualities
        /// (a step between two whole qualities is the lower one and a half).
        func inQualities(steps: Int) -> Outcome {
            func quality(_ p: Probe) -> Probe {
                var q = p
                (q.quality, q.half) = (p.quality / steps, p.quality % steps != 0)
                return q
            }
            var outcome = self
            outcome.reached = reached.map(quality)
            outcome.probes = probes.map(quality)
            return outcome
        }
    }

    /// Runs the search from `start`: `encode` makes a quality's bytes, `score` scores them.
    func run(
        start: Int, encode: (Int) throws(HalcyonError) -> Data, score: (Data) throws(HalcyonError) -> Double
    ) throws(HalcyonError) -> Outcome {
        var outcome = Outcome(probes: [])
        var miss: Probe?  // the highest quality seen below the target
        var quality = min(max(start, range.lowerBound), range.upperBound)
        while outcome.probes.count < maxEncodes {
            let data = try encode(quality)
            if let abandonAt, data.count >= abandonAt, outcome.probes.count + 1 == maxEncodes {
                outcome.probes.append(Probe(quality: quality, data: data, score: Probe.unscored, chroma: chroma))
                outcome.abandoned = true
                break
            }
            let p = Probe(quality: quality, data: data, score: try score(data), chroma: chroma)
            outcome.probes.append(p)
            if p.score >= target {
                if outcome.reached.map({ p.quality < $0.quality }) ?? true { outcome.reached = p }
            } else {
                if miss.map({ p.quality > $0.quality }) ?? true { miss = p }
                if let abandonAt, p.data.count >= abandonAt {
                    outcome.abandoned = true
                    break
                }
                if outcome.reached == nil, outOfReach(outcome.probes) {
                    outcome.gaveUp = true
                    break
                }
            }
            guard let next = next(reached: outcome.reached, miss: miss, probes: outcome.probes) else { break }
            quality = next
        }
        return outcome
    }

    /// The quality to try next; nil when the search is done.
    func next(reached: Probe?, miss: Probe?, probes: [Probe]) -> Int? {
        // Aim a little above the target, so an encode lands on the reaching side.
        let aim = target + tolerance / 2
        switch (reached, miss) {
        case let (reached?, miss?):
            let width = reached.quality - miss.quality
            guard width > 1, reached.score - target > tolerance else { return nil }
            let rise = max(reached.score - miss.score, 0.01)
            let q = Double(miss.quality) + (aim - miss.score) / rise * Double(width)
            // Within the bracket's middle half while it is wide: it shrinks by a quarter at least,
            // however the curve bends.
            let margin = width >= 4 ? width / 4 : 1
            return min(max(Int(q.rounded()), miss.quality + margin), reached.quality - margin)
        case let (reached?, nil):
            guard reached.score - target > tolerance, reached.quality > range.lowerBound else { return nil }
            let step = oneSidedStep(by: reached.score - aim, probes: probes)
            return max(reached.quality - step, range.lowerBound)
        case let (nil, miss?):
            guard miss.quality < range.upperBound else { return nil }
            let step = oneSidedStep(by: aim - miss.score, probes: probes)
            return min(miss.quality + step, range.upperBound)
        case (nil, nil):
            return nil
        }
    }

    /// Score points a quality step may wander by (a real encoder's curve dips here and there).
    static let noise = 1.0

    /// Whether the last two encodes, both missing, say the target is out of reach: at least four
    /// qualities apart (so their rise is more than an encoder's wobble), and the higher one's
    /// score plus that rise carried on to the top of the range, plus `noise`, still under it.
    func outOfReach(_ probes: [Probe]) -> Bool {
        guard probes.count >= 2 else { return false }
        let pair = [probes[probes.count - 2], probes[probes.count - 1]].sorted { $0.quality < $1.quality }
        let (low, high) = (pair[0], pair[1])
        guard high.quality - low.quality >= 4 * stepsPerQuality, low.score < target, high.score < target else { return false }
        let rise = max(high.score - low.score, 0) / Double(high.quality - low.quality)
        return high.score + rise * Double(range.upperBound - high.quality) + Self.noise < target
    }

    /// How far to move for `points` of score before the target is bracketed: by the slope the
    /// last two encodes measured (else the expected one), and at least twice the last move, so
    /// that a curve flatter than expected is bracketed in a few encodes all the same.
    private func oneSidedStep(by points: Double, probes: [Probe]) -> Int {
        var slope = self.slope, last = 0
        if probes.count >= 2 {
            let (a, b) = (probes[probes.count - 2], probes[probes.count - 1])
            last = abs(b.quality - a.quality)
            if last > 0 { slope = max((b.score - a.score) / Double(b.quality - a.quality), 0.02) }
        }
        return max(1, Int((points / slope).rounded(.up)), 2 * last)
    }
}
