import Foundation
import HalcyonChain
import HalcyonDomain
import Synchronization

/// Scores encoded bytes against the pixels they were encoded from (SSIMULACRA2, 0–100).
protocol OutputScorer {
    func score(encoded: Data, format: ImageFormat) throws(HalcyonError) -> Double
    /// Whether any of the pixels is not fully opaque.
    var hasTransparency: Bool { get }
}

/// One encode's settings.
struct Encoding {
    var format: ImageFormat
    var quality: Int
    /// Half a quality step more (JPEG through libjpeg: its scale between `quality` and the next).
    var half = false
    /// The chroma sampling (JPEG; AVIF: `.full` or not). Nil: the lane's rule (ImageMagick's:
    /// the source JPEG's sampling, else 4:4:4 from quality 90, 4:2:0 below).
    var chroma: ChromaSampling?
}

/// What a chain's output was encoded as.
struct EncodedOutput {
    var data: Data
    var format: ImageFormat
    /// The encoder's quality; nil for a format without one.
    var quality: Int?
    /// Whether the quality was `quality` and a half (a JPEG search's last step).
    var half = false
    /// SSIMULACRA2 of `data` against the chain's pixels, when it was computed.
    var score: Double?
    /// How many encodes it took.
    var encodes = 1
}

/// Encodes a chain's pixels as its `format` step says: at a fixed quality (lowered to fit
/// `max_bytes`), or — `quality=auto`, `format(auto)` — at the lowest quality whose output
/// reaches the step's score, in the smallest of its formats. Both lanes (ImageMagick's and the
/// direct one) encode through this, each with its own encoder and scorer.
struct OutputEncoder {
    /// The chain's last `format` step; nil encodes in `format` at `quality`.
    var step: FormatStep?
    /// The format and quality without a perceptual target (the step's, or the source's).
    var format: ImageFormat
    var quality: Int
    /// Whether the pixels have more than one frame (only an animating format keeps them).
    var isAnimation = false
    /// Whether to score a fixed-quality output too (the job's `score` option).
    var scoreWanted = false
    /// The chain's key for quality predictions (its identifier).
    var predictionKey = ""
    /// Whether `encode` writes JPEG at half qualities (`Encoding.half`; libjpeg directly): the
    /// search then moves in half steps.
    var halfQualities = false
    /// Encodes the pixels (for an animation, its first frame: what the search scores).
    var encode: (Encoding) throws(HalcyonError) -> Data
    /// Encodes an animation whole, once the quality is chosen; nil when `encode` is the output.
    var encodeAll: ((Encoding) throws(HalcyonError) -> Data)?
    /// Scores an encoded animation over its frames (`AnimationScore`); nil for a still. (Set by
    /// the ImageMagick lane; the direct lane has no animations.)
    var scoreAll: ((Data, ImageFormat) throws(HalcyonError) -> Double)?
    /// The scorer, made on first use (it copies the pixels into the metric's own planes).
    var makeScorer: () throws(HalcyonError) -> any OutputScorer

    func run() throws(HalcyonError) -> EncodedOutput {
        guard let step, let minScore = step.minScore else { return try fixed() }
        let scorer: any OutputScorer
        do {
            scorer = try makeScorer()
        } catch  where error.code == .tooSmallToScore {
            return try unscored(step, target: minScore)
        }
        return try perceptual(step, target: minScore, scorer: scorer)
    }

    /// An output too small to score (under 8×8): at the quality the target predicts, in the
    /// step's format (`format(auto)`: WebP when allowed, which keeps alpha and frames), unscored.
    private func unscored(_ step: FormatStep, target: Double) throws(HalcyonError) -> EncodedOutput {
        let allowed = step.formats.map(\.imageFormat).filter(\.canEncode)
        let format = step.format?.imageFormat ?? (allowed.contains(.webp) ? .webp : allowed.first ?? .jpeg)
        let quality = min(QualityModel.for(format, target: target).start, Self.highestSearched(format))
        let (data, used) = try FormatStep.encode(fitting: step.maxBytes, quality: quality, minQuality: min(step.minQuality, quality)) {
            q throws(HalcyonError) in try (encodeAll ?? encode)(Self.searched(format, q))
        }
        return EncodedOutput(data: data, format: format, quality: used)
    }

    private func fixed() throws(HalcyonError) -> EncodedOutput {
        let full = encodeAll ?? encode
        let (data, used) = try FormatStep.encode(
            fitting: step?.maxBytes, quality: quality, minQuality: step?.minQuality ?? 1
        ) { q throws(HalcyonError) in try full(Encoding(format: format, quality: q)) }
        var output = EncodedOutput(data: data, format: format, quality: format.hasQuality ? used : nil)
        if scoreWanted, let score = try? scoreOutput(data, format: format, scorer: makeScorer()) {
            output.score = score
        }
        return output
    }

    /// The score of an output as stored: a still's against the pixels, an animation's over its frames.
    private func scoreOutput(_ data: Data, format: ImageFormat, scorer: any OutputScorer) throws(HalcyonError) -> Double {
        if let scoreAll { return try scoreAll(data, format) }
        return try scorer.score(encoded: data, format: format)
    }

    /// The highest quality a search uses: 100, but 99 for JPEG XL, whose 100 is a lossless encode
    /// (10–20 times the CPU of a lossy one, and rarely the smallest that reaches a score).
    static func highestSearched(_ format: ImageFormat) -> Int { format == .jxl ? 99 : 100 }

    /// Whole encodes of an animation after its first frame's search: one when the first frame
    /// speaks for the others, more when a later frame scores lower.
    static let wholeAnimationEncodes = 3

    /// An encode of a perceptual search: JPEG with the chroma given, 4:4:4 unless the search
    /// tries 4:2:0 (ImageMagick's rule would switch at quality 90 and make the score jump there).
    static func searched(_ format: ImageFormat, _ quality: Int, half: Bool = false, chroma: ChromaSampling? = nil) -> Encoding {
        Encoding(format: format, quality: quality, half: half && format == .jpeg, chroma: format == .jpeg ? chroma ?? .full : nil)
    }

    /// Search steps per quality in `format`: two for JPEG where the encoder takes half qualities
    /// (one step of JPEG's can move a noisy picture's score by 5 points; a half step halves
    /// the overshoot), else one.
    func steps(_ format: ImageFormat) -> Int { format == .jpeg && halfQualities ? 2 : 1 }

    /// Encodes of JPEG at 4:2:0 after the 4:4:4 search found its answer: SSIMULACRA2 weighs colour
    /// detail, so 4:2:0 needs a higher quality for the same score (0–8 qualities more on the 14
    /// public photographs), and on about half of them it still takes fewer bytes (the better of
    /// the two was 0.91–0.98× the bytes of 4:4:4 alone at scores 80–88, 0.89× at 65). One encode,
    /// where recent jobs of the chain needed (else 5 qualities above 4:4:4's): on bench Q it
    /// saved 1.3 % of the bytes for about 5 % more CPU; two saved 1.5 % for 15 %.
    static let halfChromaEncodes = 1

    /// The formats the step allows for these pixels: an animation goes to an animating format
    /// (WebP, else GIF, which has no quality); transparency rules JPEG out when another format
    /// is allowed; a format this build cannot encode is skipped.
    static func candidates(_ step: FormatStep, isAnimation: Bool, hasTransparency: Bool) -> [ImageFormat] {
        var formats = step.formats.map(\.imageFormat).filter(\.canEncode)
        if isAnimation { return formats.contains(.webp) ? [.webp] : [.gif] }
        if hasTransparency, formats.count > 1 { formats.removeAll { $0 == .jpeg } }
        return formats.isEmpty ? [.jpeg] : formats
    }

    /// A JPEG at 4:2:0 reaching `target`, searched from where 4:4:4 reached it (`reached`) plus
    /// the offset recent jobs of the chain needed (else 5), in `halfChromaEncodes` at most, left
    /// at the first miss as large as `reached`; nil when none reaches it.
    private func halfChroma(after reached: Probe, target: Double, scorer: any OutputScorer, encodes: inout Int) throws(HalcyonError) -> Probe? {
        let key = "4:2:0 " + predictionKey
        let offset = QualityModel.predictions.predict(key: key, format: .jpeg) ?? 5
        let model = QualityModel.for(.jpeg, target: target)
        let search = QualitySearch(
            target: target, range: reached.quality...100, maxEncodes: Self.halfChromaEncodes, slope: model.slope,
            abandonAt: reached.data.count, chroma: .half)
        let outcome = try search.run(
            start: reached.quality + max(offset, 0),
            encode: { q throws(HalcyonError) in try encode(Self.searched(.jpeg, q, chroma: .half)) },
            score: { data throws(HalcyonError) in try scorer.score(encoded: data, format: .jpeg) })
        encodes += outcome.probes.count
        guard let half = outcome.reached else { return nil }
        QualityModel.predictions.record(key: key, format: .jpeg, quality: half.quality - reached.quality)
        return half
    }

    private func perceptual(_ step: FormatStep, target: Double, scorer: any OutputScorer) throws(HalcyonError) -> EncodedOutput {
        let formats = step.format.map { [$0.imageFormat] } ?? Self.candidates(step, isAnimation: isAnimation, hasTransparency: scorer.hasTransparency)
        var chosen: (format: ImageFormat, probe: Probe)?
        var encodes = 0
        for format in formats {
            guard format.hasQuality else {
                // GIF: no quality to choose; its score is what it is.
                let data = try (encodeAll ?? encode)(Encoding(format: format, quality: quality))
                encodes += 1
                let score = try? scoreOutput(data, format: format, scorer: scorer)
                return EncodedOutput(data: data, format: format, score: score, encodes: encodes)
            }
            // The search moves in steps (a quality, or half of one); its probes are read back
            // in qualities.
            let model = QualityModel.for(format, target: target), n = steps(format)
            let search = QualitySearch(
                target: target, range: (n * step.minQuality)...(n * Self.highestSearched(format)), slope: model.slope / Double(n),
                abandonAt: chosen.flatMap { $0.probe.score >= target ? $0.probe.data.count : nil }, chroma: format == .jpeg ? .full : nil,
                stepsPerQuality: n)
            let start = QualityModel.predictions.predict(key: predictionKey, format: format) ?? model.start
            var outcome = try search.run(
                start: n * start,
                encode: { s throws(HalcyonError) in try encode(Self.searched(format, s / n, half: s % n == 1)) },
                score: { data throws(HalcyonError) in try scorer.score(encoded: data, format: format) })
            if n > 1 { outcome = outcome.inQualities(steps: n) }
            encodes += outcome.probes.count
            guard var best = outcome.best else { continue }
            if let reached = outcome.reached {
                QualityModel.predictions.record(key: predictionKey, format: format, quality: reached.quality)
                if format == .jpeg, !isAnimation, let half = try halfChroma(after: reached, target: target, scorer: scorer, encodes: &encodes),
                    half.data.count < reached.data.count
                {
                    best = half
                }
            }
            if let current = chosen {
                let better =
                    best.score >= target
                    ? current.probe.score < target || best.data.count < current.probe.data.count
                    : current.probe.score < target && best.score > current.probe.score
                if better { chosen = (format, best) }
            } else {
                chosen = (format, best)
            }
        }
        guard let chosen else { throw HalcyonError(.processingFailed, "format(auto): no format to encode in") }
        let format = chosen.format
        var probe = chosen.probe
        let whole = encodeAll ?? encode
        if let encodeAll {
            // The search scored the first frame. The animation is encoded whole and scored over its
            // frames, and the quality moved until its worst frame reaches the target too (a flat
            // first frame says little of textured later ones); no higher once it is over max_bytes.
            let model = QualityModel.for(format, target: target)
            let search = QualitySearch(
                target: target, range: step.minQuality...100, maxEncodes: Self.wholeAnimationEncodes, tolerance: 2,
                slope: model.slope, abandonAt: step.maxBytes.map { $0 + 1 })
            let outcome = try search.run(
                start: probe.quality, encode: { q throws(HalcyonError) in try encodeAll(Self.searched(format, q)) },
                score: { data throws(HalcyonError) in try scoreOutput(data, format: format, scorer: scorer) })
            encodes += outcome.probes.count
            probe = outcome.reached ?? outcome.probes.max { $0.score < $1.score } ?? probe
        }
        if let maxBytes = step.maxBytes, probe.data.count > maxBytes {
            // The smallest result that reaches the score does not fit (an animation: all its
            // frames): the highest quality that does.
            let chroma = probe.chroma
            let (data, used) = try FormatStep.encode(
                fitting: maxBytes, quality: max(probe.half ? probe.quality : probe.quality - 1, step.minQuality), minQuality: step.minQuality
            ) { q throws(HalcyonError) in
                encodes += 1
                return try whole(Self.searched(format, q, chroma: chroma))
            }
            probe = Probe(quality: used, data: data, score: try scoreOutput(data, format: format, scorer: scorer), chroma: chroma)
        }
        return EncodedOutput(data: probe.data, format: format, quality: probe.quality, half: probe.half, score: probe.score, encodes: encodes)
    }
}

/// Where a search starts and how fast the score is expected to rise, per format: the first
/// guess before any job of the chain has finished (measured on photographs; later jobs of the
/// same chain start from the qualities their predecessors settled on).
struct QualityModel {
    var start: Int
    var slope: Double

    static func `for`(_ format: ImageFormat, target: Double) -> QualityModel {
        // Score ≈ anchor + slope × (quality − 82) around the middle of the range.
        let (anchor, slope): (Double, Double) =
            switch format {
            case .webp: (80, 0.45)
            case .avif: (82, 0.5)
            default: (84, 0.45)
            }
        let q = 82 + (target - anchor) / slope
        return QualityModel(start: Int(min(max(q, 10), 100).rounded()), slope: slope)
    }

    /// The qualities recent jobs of each chain settled on, per format.
    static let predictions = QualityPredictions()
}

/// The quality recent searches for a chain and format ended at (a moving average), so that the
/// next image of the same kind starts near its answer. Bounded: forgotten when full.
final class QualityPredictions: Sendable {
    private let entries = Mutex<[String: Double]>([:])
    static let capacity = 1024

    func predict(key: String, format: ImageFormat) -> Int? {
        entries.withLock { $0["\(format.rawValue) \(key)"] }.map { Int($0.rounded()) }
    }

    func record(key: String, format: ImageFormat, quality: Int) {
        entries.withLock { entries in
            let k = "\(format.rawValue) \(key)"
            if entries[k] == nil, entries.count >= Self.capacity { entries.removeAll() }
            entries[k] = entries[k].map { 0.7 * $0 + 0.3 * Double(quality) } ?? Double(quality)
        }
    }
}
extension SSIMULACRA2Reference: OutputScorer {}
