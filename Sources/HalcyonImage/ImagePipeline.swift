import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonRuntime
import Synchronization

/// The pixel budget: checked from the header before any pixel is decoded, and for every step
/// of a chain before it runs, so that no image a job holds — the decoded source, its frames
/// before and after they are coalesced, any step's output — is larger than this.
public struct ImageLimits: Sendable {
    /// Widest and tallest image, source or output.
    public var maxWidth = 16384
    public var maxHeight = 16384
    /// Most pixels one image may hold, all its frames together. Default: `Settings.maxPixels`. An
    /// image costs ImageMagick 8 bytes a pixel (16-bit RGBA), so a job holds about 800 MB at
    /// most per image, twice that while a step makes a new one from an old one.
    public var maxPixels = Settings.maxPixels.defaultValue
    /// Most frames (animation frames, TIFF pages).
    public var maxFrames = 300
    /// How long a source's decode may take, and then each chain's steps and encode (default:
    /// `Settings.maxJobTime`); past it the work
    /// stops at its next check (between steps, every row of a blur, sharpen or resize — not
    /// inside another single ImageMagick call) with `image.too_costly`.
    public var maxJobTime: Duration = Settings.maxJobTime.defaultValue
    /// The work a chain may be estimated to need, in pixel-taps (each step's pixels times the
    /// samples it reads per pixel: a blur's kernel width twice, a resize's filter taps, …):
    /// `pixelTapsPerSecond` for each second of `maxJobTime` (1.2 × 10^11 by default). A chain
    /// estimated past it fails with `image.too_costly` before its source is decoded.
    public var maxWork: Double { maxJobTime.seconds * pixelTapsPerSecond }
    /// A rate one core of this machine kind beats on every step measured (a blur does 1.1–1.8
    /// G pixel-taps a second): a chain refused by the estimate could not have ended in time.
    public var pixelTapsPerSecond = 1e9

    public init() {}

    /// The limits `halcyon work` exposes.
    public enum Settings {
        public static let maxPixels = Setting.pixels(
            "--max-pixels", default: 100_000_000, 1...(16384 * 16384),
            "Pixel budget: most pixels any image a job holds may have, all frames together — the decoded source and every step's output (e.g. 25MP)",
            detail: "A job uses up to about 20 bytes per budgeted pixel.")
        public static let maxJobTime = Setting.duration(
            "--max-job-time", default: .seconds(120), .seconds(1)...(.days(1)),
            "Deadline of a source's decode, and of each job's steps and encode",
            detail:
                "Past it the job fails with image.too_costly. A chain estimated to need more than 1 G pixel-taps per second of it is refused before decoding."
        )
    }

    /// Checks the limits a command line or a program may set (`job.invalid_options`).
    public func validate() throws(HalcyonError) {
        try Settings.maxPixels.check(maxPixels)
        try Settings.maxJobTime.check(maxJobTime)
        guard maxWidth >= 1, maxHeight >= 1, maxFrames >= 1, pixelTapsPerSecond > 0 else {
            throw HalcyonError(.invalidOptions, "image limits must be positive")
        }
    }

    private var budget: String {
        maxPixels % 1_000_000 == 0 ? "\(maxPixels / 1_000_000) MP" : "\(maxPixels) pixels"
    }

    private static func megapixels(_ n: Int) -> String { String(format: "%.1f MP", Double(n) / 1e6) }

    /// `image.too_large` unless one frame of `size` is within the width and height limits.
    func check(_ size: ImageSize, what: String) throws(HalcyonError) {
        guard size.width <= maxWidth, size.height <= maxHeight else {
            throw HalcyonError(.imageTooLarge, "\(what) is \(size), over the \(maxWidth)x\(maxHeight) limit")
        }
    }

    /// `image.too_large` unless `frames` frames of `size` fit the budget.
    func check(_ size: ImageSize, frames: Int, what: String) throws(HalcyonError) {
        try check(size, what: what)
        let (total, overflow) = size.pixels.multipliedReportingOverflow(by: max(1, frames))
        guard !overflow, total <= maxPixels else {
            let n = overflow ? Int.max : total
            throw HalcyonError(
                .imageTooLarge,
                frames > 1
                    ? "\(what) would be \(frames) frames of \(size) (\(Self.megapixels(n))), over the \(budget) budget"
                    : "\(what) would be \(size) (\(Self.megapixels(n))), over the \(budget) budget")
        }
    }

    /// What can be refused from the bytes alone, before any coder runs: a declared size over the
    /// limits (or of no pixels), a GIF's frames, a truncated JPEG, a JPEG of a precision the
    /// JPEG library cannot decode (ImageMagick would read a 12-bit one as an empty image).
    package func checkBytes(_ data: Data, format: ImageFormat) throws(HalcyonError) {
        if let declared = DeclaredSize.of(data, format: format) {
            let size = ImageSize(width: declared.width, height: declared.height)
            try Self.checkHasPixels(size, what: "the image")
            try check(size, frames: 1, what: "the image")
        }
        if format == .gif, let gif = DeclaredSize.gifFrames(data, maxFrames: maxFrames) {
            try check(
                MagickImage.Header(
                    width: gif.frames.first?.width ?? 0, height: gif.frames.first?.height ?? 0,
                    frames: gif.frames.count, swapsAxes: false, frameSizes: gif.frames, canvas: gif.canvas))
        }
        if format == .jpeg {
            if let bits = DeclaredSize.jpegPrecision(data), bits != 8 {
                throw HalcyonError(.unsupportedFormat, "\(bits)-bit JPEG: only 8-bit JPEGs are decoded")
            }
            guard DeclaredSize.jpegIsWhole(data) else {
                throw HalcyonError(.decodeFailed, "truncated jpeg: the data ends before the image does")
            }
        }
    }

    /// `image.decode_failed` for an image (or frame) of no pixels: every step may assume 1×1 at
    /// least.
    static func checkHasPixels(_ size: ImageSize, what: String) throws(HalcyonError) {
        guard size.width >= 1, size.height >= 1 else {
            throw HalcyonError(.decodeFailed, "\(what) has no pixels (\(size))")
        }
    }

    /// The source, from its headers: frame count, every frame's size (at least 1×1), the frames
    /// together, and the coalesced animation (every frame as large as the canvas).
    package func check(_ header: MagickImage.Header) throws(HalcyonError) {
        guard header.frames <= maxFrames else {
            throw HalcyonError(.imageTooLarge, "\(header.frames) frames, over the \(maxFrames)-frame limit")
        }
        let sizes = header.frameSizes.isEmpty ? [ImageSize(width: header.width, height: header.height)] : header.frameSizes
        var total = 0
        for (i, size) in sizes.enumerated() {
            let what = sizes.count > 1 ? "frame \(i + 1)" : "the image"
            try Self.checkHasPixels(size, what: what)
            try check(size, what: what)
            total += size.pixels
        }
        guard total <= maxPixels else {
            let largest = sizes.enumerated().max { $0.element.pixels < $1.element.pixels }!
            throw HalcyonError(
                .imageTooLarge,
                "the \(sizes.count) frames hold \(Self.megapixels(total)) (frame \(largest.offset + 1) is \(largest.element)), over the \(budget) budget"
            )
        }
        if header.frames > 1 {
            try check(header.decodedFrameSize, frames: header.frames, what: "the coalesced animation")
        }
    }

    /// Walks `chain` from a decoded image of `frames` frames of `size`, checking each step's
    /// output before it exists, and the chain's estimated work against `maxWork`.
    /// `recompression`: the chain recompresses a JPEG source as JPEG XL (`ProcessorChain.recompression`),
    /// which costs far less than encoding its pixels.
    package func plan(
        _ chain: ProcessorChain, from start: ImageSize, frames: Int, watermarks: [String: WatermarkSource] = [:], recompression: Bool = false
    ) throws(HalcyonError) {
        var size = start, work = 0.0
        for (i, processor) in chain.processors.enumerated() {
            if recompression, let step = processor as? FormatStep {
                work += step.recompressionWork(from: size)
            } else if let step = processor as? BreakpointsStep {
                // Named on its own: the set's estimate says what to lower.
                let set = step.work(from: size)
                guard set <= maxWork else {
                    throw HalcyonError(
                        .tooCostly,
                        "breakpoints on \(size): about \(step.expectedSearches) quality searches of rungs up to \(step.outputSize(from: size)) would take about \(Self.count(set)) pixel-taps of work, over the limit of \(Self.count(maxWork)) (lower max_images, max_width or the formats, or raise --max-job-time)"
                    )
                }
                work += set
            } else {
                work += processor.work(from: size) * Double(max(1, frames))
            }
            if let step = processor as? WatermarkStep, let mark = watermarks[step.source] {
                work += 8 * Double(step.markPixels(mark, on: size))
            }
            size = try check(step: i, processor, from: size, frames: frames, watermarks: watermarks, recompression: recompression)
        }
        guard work <= maxWork else {
            let image = frames > 1 ? "\(frames) frames of \(start)" : "an image of \(start)"
            throw HalcyonError(
                .tooCostly,
                "the chain would take about \(Self.count(work)) pixel-taps of work on \(image), over the limit of \(Self.count(maxWork))")
        }
    }

    /// 1.2e11 as "120 G".
    private static func count(_ n: Double) -> String {
        n >= 1e9 ? String(format: "%.3g G", n / 1e9) : n >= 1e6 ? String(format: "%.3g M", n / 1e6) : String(format: "%.0f", n)
    }

    /// Checks step `index`'s output from frames of `size`; returns that output size.
    /// A watermark step holds its mark, decoded whole and drawn, besides the image: together
    /// within the budget.
    @discardableResult
    func check(
        step index: Int, _ processor: any ImageProcessor, from size: ImageSize, frames: Int, watermarks: [String: WatermarkSource] = [:],
        recompression: Bool = false
    ) throws(HalcyonError) -> ImageSize {
        let output = processor.outputSize(from: size)
        try check(output, frames: frames, what: "step \(index + 1), \(processor.identifier),")
        if let step = processor as? WatermarkStep, let mark = watermarks[step.source] {
            let (held, overflow) = output.pixels.multipliedReportingOverflow(by: max(1, frames))
            let total = overflow ? Int.max : held.addingReportingOverflow(step.markPixels(mark, on: size)).partialValue
            guard !overflow, total >= held, total <= maxPixels else {
                throw HalcyonError(
                    .imageTooLarge,
                    "step \(index + 1), watermark, would hold \(Self.megapixels(total)) with its \(mark.size) watermark decoded, over the \(budget) budget"
                )
            }
        }
        if processor is BreakpointsStep {
            // Besides the image: up to four rungs' pixels at once (the largest, and the bisection's
            // low, high and middle widths: 8 bytes a pixel each, 1.6 of the budget's 20-byte
            // pixels together) and a rung's score reference (`FormatStep.scoredPixelCost`).
            let held = output.pixels.multipliedReportingOverflow(by: FormatStep.scoredPixelCost + 2)
            let total = size.pixels.addingReportingOverflow(held.partialValue)
            guard !held.overflow, !total.overflow, total.partialValue <= maxPixels else {
                throw HalcyonError(
                    .imageTooLarge,
                    "step \(index + 1), breakpoints, would hold \(Self.megapixels(total.overflow ? Int.max : total.partialValue)) to make and score rungs of up to \(output) from \(size), over the \(budget) budget"
                )
            }
        }
        if let step = processor as? FormatStep, step.isPerceptual || step.formats.contains(.jxl) {
            // Besides the image: the score's reference planes, 48 bytes a pixel (96 with alpha),
            // and libjxl's working memory (`jxlPixelCost`), counted at the budget's 20 bytes a pixel.
            let effort = FormatStep.jxlEffort(step.effort, for: output.pixels)
            let cost =
                (step.isPerceptual ? FormatStep.scoredPixelCost : 0)
                + (!step.formats.contains(.jxl)
                    ? 0 : recompression ? FormatStep.jxlRecompressionPixelCost : FormatStep.jxlPixelCost(effort, lossless: step.writesLosslessJXL))
            let held = output.pixels.multipliedReportingOverflow(by: cost)
            guard !held.overflow, held.partialValue <= maxPixels else {
                let why = step.isPerceptual ? "to score \(output)" : "to encode \(output) as jxl"
                throw HalcyonError(
                    .imageTooLarge,
                    "step \(index + 1), \(processor.identifier), would hold \(Self.megapixels(held.overflow ? Int.max : held.partialValue)) \(why), over the \(budget) budget"
                )
            }
        }
        return output
    }

    /// Whether a score of an output of `size` fits in the pixel budget (the job's `score` option
    /// is skipped, not failed, when it does not).
    func canScore(_ size: ImageSize) -> Bool {
        let held = size.pixels.multipliedReportingOverflow(by: FormatStep.scoredPixelCost)
        return !held.overflow && held.partialValue <= maxPixels
    }
}

/// The encoded result of a chain.
public struct ProcessedImage: Sendable {
    public var data: Data
    public var format: ImageFormat
    public var width: Int
    public var height: Int
    /// Seconds spent decoding (header, pixels, orientation, sRGB; shared by the chains of one
    /// source), in this chain's steps (and its copy of the decoded image), and encoding.
    public var decodeSeconds: Double
    public var processSeconds: Double
    public var encodeSeconds: Double
    /// The same stages' CPU time on the thread that ran them (`StageClock`).
    public var decodeCPUSeconds: Double = 0
    public var processCPUSeconds: Double = 0
    public var encodeCPUSeconds: Double = 0
    /// What the decode learned about the source (shared by the chains of one source).
    public var source: SourceFacts?
    /// The placeholders asked for, from this chain's output pixels.
    public var placeholders: Placeholders?
    /// The PDQ hashes asked for (`perceptual_hash`): the source's (shared by the chains of one
    /// source, from its decoded pixels) and this chain's output pixels'.
    public var sourceHash: PerceptualHash?
    public var outputHash: PerceptualHash?
    /// The source's seven other dihedral hashes (`perceptual_hash` "dihedral"), in
    /// `PerceptualHash.Variant` order from `rotate90`.
    public var sourceVariants: [String]?

    /// The source's hashes `request` asks for, of those computed.
    mutating func keepSourceHashes(_ hashes: [PerceptualHash]?, _ request: PerceptualHashRequest) {
        sourceHash = hashes?.first
        if request == .dihedral, let hashes, hashes.count == 8 { sourceVariants = hashes.dropFirst().map(\.hex) }
    }
    /// The encoder quality the stored bytes were written with; nil for a format without one.
    public var quality: Int?
    /// Whether that quality was `quality` and a half (a JPEG search's last step; `result_quality_exact`).
    public var halfQuality = false
    /// SSIMULACRA2 (0–100) of the stored bytes against the chain's own pixels; nil when not computed.
    public var score: Double?
    /// How many encodes the output took (more than one: `max_bytes` or `quality=auto` searched).
    public var encodes = 1
    /// A JPEG's chroma sampling, read from its bytes; nil for other formats.
    public var chroma: ChromaSampling? { format == .jpeg ? DeclaredSize.jpegChroma(data) : nil }
    /// A picture set's images (`breakpoints`), by format in the step's order, narrowest first;
    /// `data` and the fields above are then its last rung's (the fallback's largest). Nil for
    /// any other chain.
    public var rungs: [EncodedRung]?

    /// Wall and CPU seconds of the shared decode, then of this chain's steps, then its encode.
    init(
        data: Data, format: ImageFormat, width: Int, height: Int,
        decode: (wall: Double, cpu: Double), process: (wall: Double, cpu: Double), encode: (wall: Double, cpu: Double)
    ) {
        self.data = data
        self.format = format
        self.width = width
        self.height = height
        (decodeSeconds, decodeCPUSeconds) = decode
        (processSeconds, processCPUSeconds) = process
        (encodeSeconds, encodeCPUSeconds) = encode
    }

    init(
        _ output: EncodedOutput, width: Int, height: Int,
        decode: (wall: Double, cpu: Double), process: (wall: Double, cpu: Double), encode: (wall: Double, cpu: Double)
    ) {
        self.init(data: output.data, format: output.format, width: width, height: height, decode: decode, process: process, encode: encode)
        quality = output.quality
        halfQuality = output.half && output.quality != nil
        score = output.score
        encodes = output.encodes
    }
}

/// What a run of `ImagePipeline` spent, whatever its outcome: a failed chain — past its deadline
/// (`image.too_costly`), refused by a limit, cut short — cost CPU too, and usage counts it.
public struct RunCost: Sendable {
    /// Wall and CPU seconds of the work every chain shared — the byte checks, the header, the
    /// plan, the decode, orientation and sRGB — up to where it ended (the whole run when it
    /// failed before any chain began).
    public var shared: (wall: Double, cpu: Double) = (0, 0)
    /// Each chain's own CPU seconds on the processing thread, from its start (where its deadline
    /// starts) to its end, success or failure: its encode, and the rest (steps, placeholders) as
    /// its processing; zero for a chain that never began. With `shared`, every CPU second the
    /// run took on its thread.
    public var chains: [(process: Double, encode: Double)]

    public init(chains: Int) {
        self.chains = Array(repeating: (0, 0), count: chains)
    }

    /// The CPU seconds of the whole run: the shared work and every chain's.
    public var cpu: Double { shared.cpu + chains.reduce(0) { $0 + $1.process + $1.encode } }
}

/// A run's outcome — every chain's result, or the failure of the whole run — and its cost.
public struct MeasuredRun: Sendable {
    public var outcome: Result<[Result<ProcessedImage, HalcyonError>], HalcyonError>
    public var cost: RunCost
}

/// Which of a run's chains a crash would strike: all of them while the source is decoded, then
/// each one alone while its steps and encode run (`ImagePipeline.run`'s `phases`).
public enum Phase: Sendable, Equatable {
    case decoding
    case chain(Int)
}

/// Decode once → auto-orient → sRGB → each step → strip → encode, in one wand per chain — or,
/// for the sources and chains `DirectLane` takes, decode → resize → encode on 8-bit pixels.
/// Blocking: call from a Dispatch thread.
public enum ImagePipeline {
    /// Full decodes performed by this process (for metrics).
    public static var decodes: Int { decodeCount.load(ordering: .relaxed) }
    private static let decodeCount = Atomic<Int>(0)

    /// Counts the decodes made within a scope (`$observer.withValue(counter) { … }`), whatever
    /// else the process decodes meanwhile.
    public final class DecodeCounter: Sendable {
        private let n = Atomic<Int>(0)
        public init() {}
        public var count: Int { n.load(ordering: .relaxed) }
        func add() { n.add(1, ordering: .relaxed) }
    }
    @TaskLocal public static var observer: DecodeCounter?

    public static func run(
        _ data: Data, format: ImageFormat, chain: ProcessorChain,
        limits: ImageLimits = ImageLimits()
    ) throws(HalcyonError) -> ProcessedImage {
        try run(data, format: format, chains: [chain], limits: limits)[0].get()
    }

    /// The size a decode must cover for all of `chains`: the largest any of them needs, nil
    /// (a full decode) when one needs everything.
    package static func shrinkHint(_ chains: [ProcessorChain], _ header: MagickImage.Header) -> (width: Int, height: Int)? {
        let hints = chains.map { $0.shrinkHint(for: header) }
        guard !hints.isEmpty, !hints.contains(where: { $0 == nil }) else { return nil }
        return (hints.map { $0!.width }.max()!, hints.map { $0!.height }.max()!)
    }

    /// Runs several chains on one source, decoding it once: at the largest shrink-on-load size
    /// any chain needs (a full decode if one needs everything), oriented and converted to sRGB
    /// once, then each chain on its own clone. A decode failure fails every chain; a chain's
    /// own failure fails only it — a chain whose steps would go over the pixel budget fails
    /// before the decode. Results are in the order of `chains`. When `cancel` is raised the
    /// work stops before the next step (a single ImageMagick call cannot be interrupted) with
    /// `HalcyonError.abandoned`. `directLane: false` sends every source through ImageMagick (default:
    /// on, unless `HALCYON_DIRECT_CODECS=0`). `scores[i]`: score chain `i`'s output even at a
    /// fixed quality (`ProcessedImage.score`; a perceptual `format` step always does).
    public static func run(
        _ data: Data, format: ImageFormat, chains: [ProcessorChain],
        limits: ImageLimits = ImageLimits(), cancel: CancellationFlag? = nil, directLane: Bool? = nil,
        placeholders: [PlaceholderRequest?] = [], scores: [Bool] = [], hashes: [PerceptualHashRequest?] = [],
        watermarks: [String: WatermarkSource] = [:], phases: ((Phase) -> Void)? = nil
    ) throws(HalcyonError) -> [Result<ProcessedImage, HalcyonError>] {
        try measured(
            data, format: format, chains: chains, limits: limits, cancel: cancel, directLane: directLane, placeholders: placeholders, scores: scores,
            hashes: hashes, watermarks: watermarks, phases: phases
        ).outcome.get()
    }

    /// `run`, with what it spent whatever its outcome (`RunCost`): the shared decode up to where
    /// it ended, and each chain's CPU up to its success or failure.
    public static func measured(
        _ data: Data, format: ImageFormat, chains: [ProcessorChain],
        limits: ImageLimits = ImageLimits(), cancel: CancellationFlag? = nil, directLane: Bool? = nil,
        placeholders: [PlaceholderRequest?] = [], scores: [Bool] = [], hashes: [PerceptualHashRequest?] = [],
        watermarks: [String: WatermarkSource] = [:], phases: ((Phase) -> Void)? = nil
    ) -> MeasuredRun {
        var cost = RunCost(chains: chains.count)
        let outcome = Result { () throws(HalcyonError) -> [Result<ProcessedImage, HalcyonError>] in
            try run(
                data, format: format, chains: chains, limits: limits, cancel: cancel, directLane: directLane, placeholders: placeholders,
                scores: scores, hashes: hashes, watermarks: watermarks, phases: phases, cost: &cost)
        }
        return MeasuredRun(outcome: outcome, cost: cost)
    }

    private static func run(
        _ data: Data, format: ImageFormat, chains: [ProcessorChain],
        limits: ImageLimits, cancel: CancellationFlag?, directLane: Bool?,
        placeholders: [PlaceholderRequest?], scores: [Bool], hashes: [PerceptualHashRequest?], watermarks: [String: WatermarkSource],
        phases: ((Phase) -> Void)?, cost: inout RunCost
    ) throws(HalcyonError) -> [Result<ProcessedImage, HalcyonError>] {
        func placeholderRequest(_ i: Int) -> PlaceholderRequest? { i < placeholders.count ? placeholders[i] : nil }
        func outputHashWanted(_ i: Int) -> Bool { i < hashes.count && hashes[i] == .output }
        // The source's hashes: none, the original's, or its eight dihedral variants.
        let sourceVariants = hashes.compactMap { $0?.sourceVariants }.max() ?? 0
        func scoreWanted(_ i: Int) -> Bool { i < scores.count && scores[i] }
        var decodeClock = StageClock()
        // The shared work's cost, also when it fails (a decode past its deadline, a corrupt
        // image): what it took up to the failure.
        var decodeEnded = false
        defer { if !decodeEnded { cost.shared = decodeClock.lap() } }
        // The deadline: the decode, then each chain, has `maxJobTime` of its own (a group of
        // sixteen variants is sixteen jobs), on a flag raised by the caller's or by a timer.
        // The deadline is checked wherever the work polls its flag; no timer is left behind.
        let caller = cancel
        let overrun = HalcyonError(.tooCostly, "processing took longer than the \(TimeSpan.format(limits.maxJobTime.seconds)) limit (--max-job-time)")
        func phase() -> CancellationFlag {
            CancellationFlag.deadline(.now + limits.maxJobTime, because: overrun, parent: caller)
        }
        let cancel = phase()
        try limits.checkBytes(data, format: format)
        // The direct lane reads the headers itself when it will take every chain.
        let direct = (directLane ?? DirectLane.enabled) && chains.allSatisfy(DirectLane.accepts) ? DirectLane.source(data, format: format) : nil
        let header: MagickImage.Header
        if let direct { header = direct.header } else { header = try MagickImage.ping(data, format: format) }
        try limits.check(header)
        // Every chain is walked from the header's size before anything is decoded.
        let decodedSize = header.decodedFrameSize
        var results: [Result<ProcessedImage, HalcyonError>?] = chains.map { chain in
            do throws(HalcyonError) {
                try limits.plan(
                    chain, from: decodedSize, frames: chain.keepsFrames(of: format) ? header.frames : 1, watermarks: watermarks,
                    recompression: format == .jpeg && chain.recompression != nil)
                return nil
            } catch {
                return .failure(error)
            }
        }
        let planned = chains.indices.filter { results[$0] == nil }
        guard let lastPlanned = planned.last else { return results.map { $0! } }
        try cancel.check()
        let hint = shrinkHint(planned.map { chains[$0] }, header)
        phases?(.decoding)
        if let direct, let pixels = DirectLane.decode(data, direct, hint: hint) {
            decodeCount.add(1, ordering: .relaxed)
            observer?.add()
            let facts = SourceFacts.read(data, format: format, header: header, hasAlpha: direct.channels == 4, profile: nil)
            // The source's hash, from the pixels as decoded (at the scale the chains need).
            let sourceHashes = sourceVariants > 0 ? try PerceptualHash.compute(pixels, variants: sourceVariants) : nil
            let decode = decodeClock.lap()
            (cost.shared, decodeEnded) = (decode, true)
            for i in planned {
                // The chain's deadline and its cost start before it is reported begun (when a
                // supervisor starts counting it too).
                let cancel = phase(), started = StageClock.threadCPUSeconds()
                phases?(.chain(i))
                results[i] = Result { () throws(HalcyonError) -> ProcessedImage in
                    var image = try DirectLane.run(
                        chains[i], on: pixels, source: direct, limits: limits, cancel: cancel, decode: decode, placeholders: placeholderRequest(i),
                        scoreWanted: scoreWanted(i), outputHash: outputHashWanted(i))
                    image.source = facts
                    if hashes.indices.contains(i), let request = hashes[i] { image.keepSourceHashes(sourceHashes, request) }
                    return image
                }
                cost.chains[i] = Self.chainCost(results[i]!, started: started, encodeStarted: nil)
            }
            return results.map { $0! }
        }
        // A still output needs the first frame only: other pages are never decoded.
        let stills = planned.allSatisfy { !chains[$0].keepsFrames(of: format) }
        let base = try MagickImage.decode(data, format: format, shrinkHint: hint, firstFrameOnly: stills && header.frames > 1)
        base.cancellation = cancel
        base.watermarks = watermarks
        decodeCount.add(1, ordering: .relaxed)
        observer?.add()
        try cancel.check()
        let facts = SourceFacts.read(
            data, format: format, header: header, hasAlpha: base.hasAlpha,
            profile: base.embeddedProfile().flatMap(ICCProfile.description(of:)), exif: base.exifProfile)
        try base.autoOrient()
        // A gray image's conversion to sRGB reopens its pixel cache — a second full-size copy
        // for a moment. Where every chain starts by shrinking, each converts after that step
        // instead (gray pixels are R = G = B in either space, so the resize is the same).
        let graySRGBAfterShrink = base.isGray && planned.allSatisfy { chains[$0].startsByShrinking }
        if !graySRGBAfterShrink { try base.toSRGB() }
        // The source's hash, oriented, in sRGB (a gray image's pixels are the same either way).
        let sourceHashes = sourceVariants > 0 ? try PerceptualHash.compute(base, variants: sourceVariants) : nil
        let decode = decodeClock.lap()
        (cost.shared, decodeEnded) = (decode, true)
        for i in planned {
            let cancel = phase(), started = StageClock.threadCPUSeconds()
            phases?(.chain(i))
            var encodeStarted: Double?
            results[i] = Result { () throws(HalcyonError) -> ProcessedImage in
                try cancel.check()
                var clock = StageClock()
                let chain = chains[i]
                let image = i == lastPlanned ? base : base.clone()  // the last chain may consume the original
                image.cancellation = cancel
                if let output = chain.outputFormat { image.outputFormat = output }
                if !chain.keepsFrames(of: format) { image.keepFirstFrame() }
                for (n, processor) in chain.processors.enumerated() {
                    try cancel.check()
                    // The plan used the header's size; this is the image's own, just before the step.
                    try limits.check(
                        step: n, processor, from: ImageSize(width: image.width, height: image.height), frames: image.frameCount,
                        watermarks: watermarks, recompression: format == .jpeg && chain.recompression != nil)
                    do throws(HalcyonError) {
                        try processor.process(image)
                        if graySRGBAfterShrink, processor is any ShrinkingProcessor { try image.toSRGB() }
                    } catch {
                        try cancel.check()  // a step cut short by the abandonment is not a failure of its own
                        throw error
                    }
                }
                let placeholders = try placeholderRequest(i).map { request throws(HalcyonError) in try Thumbnail(image).placeholders(request) }
                let outputHash = outputHashWanted(i) ? try PerceptualHash.compute(image)?.first : nil
                try cancel.check()
                let process = clock.lap()
                encodeStarted = StageClock.threadCPUSeconds()
                if let step = chain.chain.breakpoints {
                    var builder = try PictureSetBuilder(step: step, image: image, cancel: cancel)
                    let rungs = try builder.build()
                    let last = rungs[rungs.count - 1]
                    var output = EncodedOutput(data: last.data, format: last.format, quality: last.quality, half: last.halfQuality, score: last.score)
                    output.encodes = builder.encodes
                    var result = ProcessedImage(output, width: last.width, height: last.height, decode: decode, process: process, encode: clock.lap())
                    result.rungs = rungs
                    result.source = facts
                    result.placeholders = placeholders
                    if hashes.indices.contains(i), let request = hashes[i] { result.keepSourceHashes(sourceHashes, request) }
                    result.outputHash = outputHash
                    return result
                }
                let output: EncodedOutput
                if format == .jpeg, let step = chain.recompression {
                    output = try Self.recompress(data, orientation: facts.orientation, image: image, step: step, chain: chain, limits: limits)
                } else {
                    output = try OutputEncoder.magick(
                        image, chain: chain, scoreWanted: scoreWanted(i) && limits.canScore(ImageSize(width: image.width, height: image.height))
                    ).run()
                }
                var result = ProcessedImage(output, width: image.width, height: image.height, decode: decode, process: process, encode: clock.lap())
                result.source = facts
                result.placeholders = placeholders
                if hashes.indices.contains(i), let request = hashes[i] { result.keepSourceHashes(sourceHashes, request) }
                result.outputHash = outputHash
                return result
            }
            cost.chains[i] = Self.chainCost(results[i]!, started: started, encodeStarted: encodeStarted)
        }
        return results.map { $0! }
    }

    /// `format(jxl, lossless=true)` of an untouched JPEG: the source's bytes recompressed
    /// (reconstructable byte for byte; no quality) — its metadata dropped first unless the step
    /// keeps it (`JPEGMetadata`) — or, a JPEG libjxl cannot take so (arithmetic coding, CMYK,
    /// …) or whose markers do not walk, its decoded pixels, losslessly (quality 100) — when the
    /// limits allow that far costlier encode (planned again without the recompression).
    /// `orientation` is the source's EXIF orientation as its facts read it: what the stripped
    /// JPEG keeps of its EXIF.
    private static func recompress(
        _ jpeg: Data, orientation: Int, image: MagickImage, step: FormatStep, chain: ProcessorChain, limits: ImageLimits
    ) throws(HalcyonError) -> EncodedOutput {
        let effort = FormatStep.jxlEffort(image.jxlEffort, for: image.width * image.height)
        if let source = step.keepMetadata ? jpeg : JPEGMetadata.stripped(jpeg, orientation: orientation) {
            do {
                return EncodedOutput(data: try MagickImage.transcodeJPEGToJXL(source, effort: effort), format: .jxl, quality: nil)
            } catch  where error.code == .unsupportedFormat {}
        }
        try limits.plan(chain, from: ImageSize(width: image.width, height: image.height), frames: 1)
        image.outputQuality = 100
        return EncodedOutput(data: try image.encode(), format: .jxl, quality: 100)
    }

    /// A chain's own CPU on this thread from `started` to now, whatever its outcome: its encode
    /// (a success's as it measured it; a failure's from `encodeStarted`, if it got that far), and
    /// everything else as its processing.
    private static func chainCost(
        _ result: Result<ProcessedImage, HalcyonError>, started: Double, encodeStarted: Double?
    ) -> (process: Double, encode: Double) {
        let total = max(0, StageClock.threadCPUSeconds() - started)
        let encode =
            if case .success(let image) = result { image.encodeCPUSeconds } else { encodeStarted.map { max(0, started + total - $0) } ?? 0 }
        return (max(0, total - encode), min(encode, total))
    }
}
