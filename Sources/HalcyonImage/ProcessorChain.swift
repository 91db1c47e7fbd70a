import HalcyonDomain

/// A parsed, validated chain and its canonical identifier.
public struct ProcessorChain: Sendable {
    /// Every processor the grammar knows, by step name.
    static let registry: [String: any ImageProcessor.Type] = Dictionary(
        uniqueKeysWithValues: ([
            ResizeProcessor.self, DownsampleProcessor.self, CropProcessor.self, RoundCornerProcessor.self,
            BlurProcessor.self, SharpenProcessor.self, OverlayProcessor.self, TintProcessor.self,
            ColorControlsProcessor.self, BlackWhiteProcessor.self, BlendProcessor.self, RotateProcessor.self,
            FlipProcessor.self, FlopProcessor.self, AutoOrientProcessor.self, StripProcessor.self, FormatProcessor.self,
            TrimProcessor.self, PadProcessor.self, BorderProcessor.self, WatermarkProcessor.self,
        ] as [any ImageProcessor.Type]).map { ($0.name, $0) } + [("extend", PadProcessor.self)])

    public var processors: [any ImageProcessor]

    /// The steps' identifiers joined by `|>`; empty for an empty chain.
    public var identifier: String { processors.map(\.identifier).joined(separator: "|>") }

    /// Parses chain text; `job.invalid_chain` naming the column on any error. A `preset(NAME)`
    /// step is replaced by the steps of `presets[NAME]` (chain text without presets of its own),
    /// so the identifier — and the result key — is the expanded chain's.
    public static func parse(_ text: String, presets: [String: String] = [:]) throws(HalcyonError) -> ProcessorChain {
        do {
            return try parseOrThrow(text, presets: presets)
        } catch {
            throw error.halcyonError
        }
    }

    /// Most distinct watermark sources one chain may draw (each is fetched, and decoded for
    /// each draw). 4.
    public static let maxWatermarks = 4

    /// The step that names a preset.
    public static let presetStep = "preset"

    static func parseOrThrow(_ text: String, presets: [String: String] = [:]) throws(ChainError) -> ProcessorChain {
        var processors: [any ImageProcessor] = []
        for step in try ChainGrammar.parse(text) {
            if step.name == presetStep {
                let name = try presetName(step)
                guard let chain = presets[name] else {
                    throw ChainError(position: step.position, found: "unknown preset '\(name)'", expected: "a preset (halcyon preset list)")
                }
                let expanded: [ChainStep]
                do {
                    expanded = try ChainGrammar.parse(chain)
                } catch {
                    throw ChainError(position: step.position, found: "preset '\(name)': \(error)", expected: "a preset whose chain parses")
                }
                for inner in expanded {
                    guard inner.name != presetStep else {
                        throw ChainError(position: step.position, found: "preset '\(name)' naming another preset", expected: "presets of plain steps")
                    }
                    do {
                        processors.append(try processor(inner))
                    } catch {
                        throw ChainError(position: step.position, found: "preset '\(name)': \(error)", expected: "a preset whose chain parses")
                    }
                }
            } else {
                processors.append(try processor(step))
            }
            if processors.count > ChainGrammar.maxSteps {
                throw ChainError(
                    position: step.position, found: "step \(processors.count)", expected: "at most \(ChainGrammar.maxSteps) steps, presets expanded")
            }
            let marks = ProcessorChain(processors: processors).watermarkSources.count
            if marks > maxWatermarks {
                throw ChainError(
                    position: step.position, found: "a \(marks)th distinct watermark",
                    expected: "at most \(maxWatermarks) distinct watermark sources in a chain (one may be drawn many times)")
            }
        }
        return ProcessorChain(processors: processors)
    }

    private static func processor(_ step: ChainStep) throws(ChainError) -> any ImageProcessor {
        guard let type = registry[step.name] else {
            throw ChainError(
                position: step.position, found: "unknown step '\(step.name)'",
                expected: "one of \((registry.keys + [presetStep]).sorted().joined(separator: ", "))")
        }
        return try type.init(step: step)
    }

    /// The name in `preset(NAME)` (or `preset(name=NAME)`).
    private static func presetName(_ step: ChainStep) throws(ChainError) -> String {
        var a = try StepArguments(step, keys: ["name"])
        guard let argument = a.take("name"), case .word(let name) = argument.value else {
            throw ChainError(position: step.position, found: "'\(step.name)' without a name", expected: "preset(NAME)")
        }
        try a.finish()
        return name
    }

    /// The preset names `text` uses, in order (empty when it does not parse: the parse itself
    /// reports that).
    public static func presetNames(inOrder text: String) -> [String] {
        guard let steps = try? ChainGrammar.parse(text) else { return [] }
        return steps.filter { $0.name == presetStep }.compactMap { try? presetName($0) }
    }

    /// The result key: `cacheKey@identifier`, or just `cacheKey` for an empty chain.
    public func resultKey(cacheKey: String) -> String {
        let id = identifier
        return id.isEmpty ? cacheKey : "\(cacheKey)@\(id)"
    }

    /// The sources of its `watermark` steps, each once, in order.
    public var watermarkSources: [String] {
        var seen: Set<String> = []
        return processors.compactMap { ($0 as? WatermarkProcessor)?.source }.filter { seen.insert($0).inserted }
    }

    /// The output encoding chosen by the last `format` step, if any.
    public var outputFormat: ImageFormat? { formatStep?.format?.imageFormat }

    /// The last `format` step, whose settings the encoder uses.
    var formatStep: FormatProcessor? { processors.compactMap { $0 as? FormatProcessor }.last }

    /// Whether the output keeps every frame of an animation: GIF and WebP outputs animate (a
    /// `format(gif)` or `format(webp)`, or no `format` on such a source); any other output is
    /// the first frame, and the other frames are dropped before the first step.
    func keepsFrames(of source: ImageFormat) -> Bool { (outputFormat ?? source).animates }

    /// Whether the first pixel-changing step is a resize or downsample.
    var startsByShrinking: Bool {
        processors.first(where: { !($0 is FormatProcessor || $0 is StripProcessor || $0 is AutoOrientProcessor) }) is any ShrinkingProcessor
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
        case let r as ResizeProcessor where r.mode == .fill: k = max(Double(need.width) / Double(w), Double(need.height) / Double(h))
        case let r as ResizeProcessor where r.mode == .stretch: return header.swapsAxes ? (need.height, need.width) : (need.width, need.height)
        default: k = min(Double(need.width) / Double(w), Double(need.height) / Double(h))
        }
        guard k < 1 else { return nil }
        // Round up, but not float noise (3024 × 400/3024 can come out as 400.0000001).
        let dw = Int((Double(w) * k - 1e-6).rounded(.up)), dh = Int((Double(h) * k - 1e-6).rounded(.up))
        return header.swapsAxes ? (dh, dw) : (dw, dh)
    }
}
