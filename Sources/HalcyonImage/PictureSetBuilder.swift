import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonRuntime

/// One image of a picture set, encoded.
public struct EncodedRung: Sendable {
    public var width: Int
    public var height: Int
    public var format: ImageFormat
    public var data: Data
    /// The encoder quality, and whether it was that and a half (JPEG).
    public var quality: Int?
    public var halfQuality = false
    /// SSIMULACRA2 against the rung's own pixels; nil when too small to score.
    public var score: Double?
    /// A JPEG's chroma sampling, read from its bytes; nil for other formats.
    public var chroma: ChromaSampling? { format == .jpeg ? DeclaredSize.jpegChroma(data) : nil }
}

extension BreakpointsStep: ShrinkingProcessor {
    /// Nothing wider than `max_width` is read: a JPEG is decoded at the smallest scale that
    /// still covers it.
    var minimumDecodeSize: (width: Int, height: Int) { (maxWidth, 16384) }

    /// The perceptual searches a set is expected to make: every format at the largest and the
    /// smallest width, and for each width between, the bisection's probes in the widest format
    /// (`PictureSetBuilder.expectedProbes`) and one search in each other format.
    var expectedSearches: Int { 2 * formats.count + max(0, maxImages - 2) * (PictureSetBuilder.expectedProbes + formats.count - 1) }

    /// The work a set is expected to take: its searches (`expectedSearches`), each
    /// `PictureSetBuilder.encodesPerSearch` encodes, decoded and scored, of a rung of
    /// `rungAreaShare` of the largest's pixels, at `PictureSetBuilder.encodeWork` a pixel; and a
    /// resize from the input for each width tried. An expectation, not a bound: a set estimated
    /// past what `--max-job-time` allows is refused before its decode (it could not end in time);
    /// one that takes longer than expected is stopped by the deadline.
    public func work(from input: ImageSize) -> Double {
        let top = outputSize(from: input)
        let rung = Double(top.pixels) * PictureSetBuilder.rungAreaShare
        let searches = Double(expectedSearches) * PictureSetBuilder.encodesPerSearch * rung * PictureSetBuilder.encodeWork
        let widths = Double(2 + max(0, maxImages - 2) * PictureSetBuilder.expectedProbes)
        return searches + widths * Resampler.work(from: input, to: top)
    }

    /// Nothing: `PictureSetBuilder` makes the rungs from the image the steps before it left.
    public func process(_ image: MagickImage) throws(HalcyonError) {}
}

/// Makes a picture set from a chain's pixels (`breakpoints`): the widths by encoding, every rung
/// at the lowest quality that reaches `min_score`, each resized from the same pixels.
///
/// Widths: the largest rung (`max_width`, or the image's own width when narrower) is encoded in
/// every format first; the format of the most bytes there is the one the widths are chosen in.
/// From `min_width`, each next width is the narrowest (to within `tolerance`) whose output is at
/// least the step larger than the one below — a bisection on encoded bytes, keeping the invariant
/// that its upper end reaches the target — and the largest rung ends the set. The step is
/// `bytes_step`, widened so that the widths fit in `max_images` when both cannot hold. Each
/// width's other formats are encoded from the same resized pixels. A rung whose search could not
/// reach the floor, or with as many bytes as a wider one of its format, is left out (a browser
/// that would pick it takes a wider rung of the same format). The flag is checked before every
/// encode.
struct PictureSetBuilder {
    var step: BreakpointsStep
    var image: MagickImage
    var cancel: CancellationFlag
    /// Per format: its `format` step's chain (the quality search's settings).
    private var chains: [ImageFormat: ProcessorChain] = [:]
    private(set) var encodes = 0

    /// What the estimate (`BreakpointsStep.work`) expects, from `halcyon bench` P (the default
    /// set on photographs 400–4032 px wide, release build, one thread): a bisection settles in
    /// about 3 probes; a search takes 2.4–4.4 encodes (3 here); a rung averages about 0.6 of the
    /// largest rung's pixels; an encode with its decode and score took 160–175 ns a pixel over
    /// the three formats (AVIF the most). The default set on a 12-megapixel photograph is then
    /// expected at about 23 s; it took 12–29 s over two runs.
    static let expectedProbes = 3
    static let encodesPerSearch = 3.0
    static let rungAreaShare = 0.6
    static let encodeWork = 170.0

    init(step: BreakpointsStep, image: MagickImage, cancel: CancellationFlag) throws(HalcyonError) {
        self.step = step
        self.image = image
        self.cancel = cancel
        for format in step.formats {
            chains[format.imageFormat] = try ProcessorChain.parse(step.formatText(format))
        }
    }

    /// How close two widths may be before the bisection stops: a sixteenth of the wider, at
    /// least 8 pixels.
    static func tolerance(_ width: Int) -> Int { max(8, width / 16) }

    /// The rungs, by format in the step's order, narrowest first. Past the deadline, or
    /// abandoned, the flag's error (a resize cut short is not a failure of its own).
    mutating func build() throws(HalcyonError) -> [EncodedRung] {
        do {
            return try widths()
        } catch {
            try cancel.check()
            throw error
        }
    }

    private mutating func widths() throws(HalcyonError) -> [EncodedRung] {
        let source = ImageSize(width: image.width, height: image.height)
        let top = BreakpointsStep.rungSize(width: step.maxWidth, of: source).width
        let bottom = min(step.minWidth, top)
        var rungs: [Int: [ImageFormat: EncodedRung]] = [:]
        let topImage = try resized(top)
        for format in step.formats { rungs[top, default: [:]][format.imageFormat] = try encode(topImage, format.imageFormat) }
        // The format the widths are chosen in: the most bytes at the top (ties: the later listed).
        var widest = step.fallback.imageFormat
        for format in step.formats.map(\.imageFormat) where rungs[top]![format]!.data.count >= rungs[top]![widest]!.data.count {
            widest = format
        }
        let topBytes = rungs[top]![widest]!.data.count
        if bottom < top, step.maxImages >= 2 {
            var current = bottom
            let low = try resized(bottom)
            var lowRung = try encode(low, widest)
            rungs[bottom] = try others(low, except: widest, [widest: lowRung])
            let stepBytes = max(step.bytesStep, (topBytes - lowRung.data.count + step.maxImages - 2) / (step.maxImages - 1))
            var count = 1
            while count < step.maxImages - 1 {
                let target = lowRung.data.count + stepBytes
                guard topBytes >= target else { break }
                // Bisect (current, top]: `hi` always reaches the target.
                var lo = current, hi = top
                var hiRung = rungs[top]![widest]!
                var hiImage: MagickImage? = nil
                while hi - lo > Self.tolerance(hi) {
                    let mid = (lo + hi) / 2
                    let midImage = try resized(mid)
                    let midRung = try encode(midImage, widest)
                    if midRung.data.count >= target {
                        (hi, hiRung, hiImage) = (mid, midRung, midImage)
                    } else {
                        lo = mid
                    }
                }
                // A width within the tolerance of the largest would be a near copy of it.
                guard hi < top - Self.tolerance(top), let hiImage else { break }
                rungs[hi] = try others(hiImage, except: widest, [widest: hiRung])
                (current, lowRung, count) = (hi, hiRung, count + 1)
            }
        }
        return step.formats.flatMap { format in
            let own = rungs.keys.sorted().compactMap { rungs[$0]?[format.imageFormat] }
            return Self.cheaperThanWider(Self.reachingTheFloor(own, minScore: step.minScore, keepWidest: format == step.fallback))
        }
    }

    /// `rungs` (one format, narrowest first) without those whose search could not reach
    /// `minScore` (AVIF's 4:2:0 chroma kept a 160-px photograph under 67 even at quality 100): a
    /// browser is better served by a wider rung that does. The fallback's widest stays whatever
    /// its score — it is the job's `result_*`, which records a miss (`result_target_missed`).
    static func reachingTheFloor(_ rungs: [EncodedRung], minScore: Double, keepWidest: Bool) -> [EncodedRung] {
        rungs.enumerated().filter { i, rung in (rung.score.map { $0 >= minScore } ?? true) || (keepWidest && i == rungs.count - 1) }.map(\.element)
    }

    /// `rungs` (one format, narrowest first) without any that has as many bytes as a wider one:
    /// a browser that would pick it is better served by the wider rung. At a small width the
    /// floor can take a far higher quality (a 160-px WebP reaching 70 was larger than its 420-px
    /// rung); the widths chosen in the format of the most bytes keep theirs, which rise by the step.
    static func cheaperThanWider(_ rungs: [EncodedRung]) -> [EncodedRung] {
        var kept: [EncodedRung] = []
        for rung in rungs.reversed() where kept.last.map({ rung.data.count < $0.data.count }) ?? true { kept.append(rung) }
        return kept.reversed()
    }

    /// The pixels `width` wide, resized from the chain's image.
    private func resized(_ width: Int) throws(HalcyonError) -> MagickImage {
        try cancel.check()
        let size = BreakpointsStep.rungSize(width: width, of: ImageSize(width: image.width, height: image.height))
        let copy = image.clone()
        try copy.resize(width: size.width, height: size.height)
        return copy
    }

    /// `rungs` with the set's other formats encoded from `pixels`.
    private mutating func others(
        _ pixels: MagickImage, except done: ImageFormat, _ rungs: [ImageFormat: EncodedRung]
    ) throws(HalcyonError)
        -> [ImageFormat: EncodedRung]
    {
        var all = rungs
        for format in step.formats.map(\.imageFormat) where format != done { all[format] = try encode(pixels, format) }
        return all
    }

    /// A rung: the quality search at `min_score` in `format`, starting where recent searches of
    /// the same set and octave of width ended.
    private mutating func encode(_ pixels: MagickImage, _ format: ImageFormat) throws(HalcyonError) -> EncodedRung {
        try cancel.check()
        var encoder = OutputEncoder.magick(pixels, chain: chains[format]!, scoreWanted: false)
        // Per octave of width: a 160-px rung needs a far higher quality than an 800-px one.
        encoder.predictionKey = "breakpoints \(pixels.width.bitWidth - pixels.width.leadingZeroBitCount) " + step.identifier
        let output = try encoder.run()
        encodes += output.encodes
        return EncodedRung(
            width: pixels.width, height: pixels.height, format: output.format, data: output.data, quality: output.quality,
            halfQuality: output.half, score: output.score)
    }
}
