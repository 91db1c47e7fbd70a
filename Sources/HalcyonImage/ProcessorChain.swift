import HalcyonChain
import HalcyonDomain

/// A parsed, validated chain (`Chain`) with each step's processor: what the pipeline runs.
public struct ProcessorChain: Sendable {
    /// The chain as parsed: its steps, presets expanded.
    public let chain: Chain
    /// Its steps' processors, in order.
    public let processors: [any ImageProcessor]

    /// The processors of `chain`'s steps. Every step type the grammar registers conforms to
    /// `ImageProcessor` (a test checks each one); a step without one is an `internal` error,
    /// never a trap.
    public init(_ chain: Chain) throws(HalcyonError) {
        var processors: [any ImageProcessor] = []
        for step in chain.steps {
            guard let processor = step as? any ImageProcessor else {
                throw HalcyonError(.internal, "the step '\(type(of: step).name)' has no processor")
            }
            processors.append(processor)
        }
        self.chain = chain
        self.processors = processors
    }

    /// Parses chain text (`Chain.parse`): `job.invalid_chain` naming the column on any error,
    /// `preset(NAME)` steps expanded from `presets`.
    public static func parse(_ text: String, presets: [String: String] = [:]) throws(HalcyonError) -> ProcessorChain {
        try ProcessorChain(Chain.parse(text, presets: presets))
    }

    /// The steps' identifiers joined by `|>`; empty for an empty chain.
    public var identifier: String { chain.identifier }

    /// The result key: `cacheKey@identifier`, or just `cacheKey` for an empty chain.
    public func resultKey(cacheKey: String) -> String { chain.resultKey(cacheKey: cacheKey) }

    /// The sources of its `watermark` steps, each once, in order.
    public var watermarkSources: [String] { chain.watermarkSources }

    /// The output encoding chosen by the last `format` step, if any.
    public var outputFormat: ImageFormat? { chain.outputFormat }

    /// The last `format` step, whose settings the encoder uses.
    var formatStep: FormatStep? { chain.formatStep }

    /// The perceptual score its `format` step (or its `breakpoints` step) asks for
    /// (`min_score`); nil without one.
    public var minScore: Double? { chain.breakpoints?.minScore ?? chain.formatStep?.minScore }

    /// Whether the output keeps every frame of an animation: GIF and WebP outputs animate (a
    /// `format(gif)` or `format(webp)`, or no `format` on such a source); any other output is
    /// the first frame, and the other frames are dropped before the first step.
    /// A picture set's rungs are stills.
    func keepsFrames(of source: ImageFormat) -> Bool { chain.breakpoints == nil && (outputFormat ?? source).animates }

    /// The `format(jxl, lossless=true)` step when a JPEG source's output is the source itself
    /// recompressed (no other step, not even `strip` or `auto_orient`: nothing touches its
    /// pixels, so the JPEG's coded data can be given back byte for byte); nil otherwise.
    var recompression: FormatStep? {
        guard let step = formatStep, step.lossless, processors.allSatisfy({ $0 is FormatStep }) else { return nil }
        return step
    }

    /// Whether the first pixel-changing step is a resize or downsample.
    var startsByShrinking: Bool {
        processors.first(where: { !($0 is FormatStep || $0 is StripStep || $0 is AutoOrientStep) }) is any ShrinkingProcessor
    }

    /// The shrink-on-load hint for a source of `header`: when the first pixel-changing step
    /// shrinks, the smallest decode size (in the file's stored orientation) that still gives
    /// that step every pixel it needs; nil when nothing may be dropped.
    func shrinkHint(for header: MagickImage.Header) -> (width: Int, height: Int)? {
        guard startsByShrinking, let shrinking = processors.first(where: { $0 is any ShrinkingProcessor }) as? any ShrinkingProcessor
        else { return nil }
        // Work in display orientation, then map back to the stored one.
        let (w, h) = header.swapsAxes ? (header.height, header.width) : (header.width, header.height)
        let need = shrinking.minimumDecodeSize
        let k: Double
        switch shrinking {
        case let r as ResizeStep where r.mode == .fill: k = max(Double(need.width) / Double(w), Double(need.height) / Double(h))
        case let r as ResizeStep where r.mode == .stretch: return header.swapsAxes ? (need.height, need.width) : (need.width, need.height)
        default: k = min(Double(need.width) / Double(w), Double(need.height) / Double(h))
        }
        guard k < 1 else { return nil }
        // Round up, but not float noise (3024 × 400/3024 can come out as 400.0000001).
        let dw = Int((Double(w) * k - 1e-6).rounded(.up)), dh = Int((Double(h) * k - 1e-6).rounded(.up))
        return header.swapsAxes ? (dh, dw) : (dw, dh)
    }
}
