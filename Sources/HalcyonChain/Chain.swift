import HalcyonDomain

/// A parsed, validated chain: its steps, presets expanded, and its canonical identifier.
public struct Chain: Sendable {
    /// Every step the grammar knows, by name (`extend` is `pad`'s alias; `preset` is expanded
    /// before any step is looked up here).
    public static let registry: [String: any ChainStepDefinition.Type] = Dictionary(
        uniqueKeysWithValues: ([
            ResizeStep.self, DownsampleStep.self, CropStep.self, RoundCornerStep.self,
            BlurStep.self, SharpenStep.self, OverlayStep.self, TintStep.self,
            ColorControlsStep.self, BlackWhiteStep.self, BlendStep.self, RotateStep.self,
            FlipStep.self, FlopStep.self, AutoOrientStep.self, StripStep.self, FormatStep.self,
            TrimStep.self, PadStep.self, BorderStep.self, WatermarkStep.self, BreakpointsStep.self,
        ] as [any ChainStepDefinition.Type]).map { ($0.name, $0) } + [("extend", PadStep.self)])

    /// The steps, in order.
    public var steps: [any ChainStepDefinition]

    /// The steps' identifiers joined by `|>`; empty for an empty chain.
    public var identifier: String { steps.map(\.identifier).joined(separator: "|>") }

    /// Parses chain text; `job.invalid_chain` naming the column on any error. A `preset(NAME)`
    /// step is replaced by the steps of `presets[NAME]` (chain text without presets of its own),
    /// so the identifier — and the result key — is the expanded chain's.
    public static func parse(_ text: String, presets: [String: String] = [:]) throws(HalcyonError) -> Chain {
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

    static func parseOrThrow(_ text: String, presets: [String: String] = [:]) throws(ChainError) -> Chain {
        var steps: [any ChainStepDefinition] = []
        var positions: [Int] = []  // of each step in `text` (a preset's steps: the preset's)
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
                        steps.append(try definition(inner))
                    } catch {
                        throw ChainError(position: step.position, found: "preset '\(name)': \(error)", expected: "a preset whose chain parses")
                    }
                }
            } else {
                steps.append(try definition(step))
            }
            positions += Array(repeating: step.position, count: steps.count - positions.count)
            if steps.count > ChainGrammar.maxSteps {
                throw ChainError(
                    position: step.position, found: "step \(steps.count)", expected: "at most \(ChainGrammar.maxSteps) steps, presets expanded")
            }
            let marks = Chain(steps: steps).watermarkSources.count
            if marks > maxWatermarks {
                throw ChainError(
                    position: step.position, found: "a \(marks)th distinct watermark",
                    expected: "at most \(maxWatermarks) distinct watermark sources in a chain (one may be drawn many times)")
            }
        }
        try checkBreakpoints(steps, positions: positions)
        return Chain(steps: steps)
    }

    /// A `breakpoints` step ends its chain, and names the formats itself (no `format` step).
    private static func checkBreakpoints(_ steps: [any ChainStepDefinition], positions: [Int]) throws(ChainError) {
        guard let at = steps.firstIndex(where: { $0 is BreakpointsStep }) else { return }
        let position = positions[at]
        guard at == steps.count - 1 else {
            throw ChainError(
                position: position, found: "'\(type(of: steps[at + 1]).name)' after breakpoints", expected: "breakpoints as the chain's last step")
        }
        // A rung's own chain (its key) is the steps before, a resize and a format step.
        guard at + 2 <= ChainGrammar.maxSteps else {
            throw ChainError(
                position: position, found: "breakpoints after \(at) steps",
                expected: "at most \(ChainGrammar.maxSteps - 2) steps before breakpoints (each rung's chain adds a resize and a format step)")
        }
        if steps.contains(where: { $0 is FormatStep }) {
            throw ChainError(
                position: position, found: "a format step with breakpoints",
                expected: "breakpoints alone: it encodes every rung in its own formats, at quality=auto for its min_score")
        }
    }

    private static func definition(_ step: ChainStep) throws(ChainError) -> any ChainStepDefinition {
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
        return steps.compactMap { ($0 as? WatermarkStep)?.source }.filter { seen.insert($0).inserted }
    }

    /// The output encoding chosen by the last `format` step, if any; a picture set's is its
    /// fallback's (the `<img>`'s format, whose largest rung fills `result_*`).
    public var outputFormat: ImageFormat? { breakpoints?.fallback.imageFormat ?? formatStep?.format?.imageFormat }

    /// The `breakpoints` step that ends the chain: the job makes a picture set.
    public var breakpoints: BreakpointsStep? { steps.last as? BreakpointsStep }

    /// The steps before its `breakpoints` step (all of them without one).
    public var stepsBeforeBreakpoints: [any ChainStepDefinition] { breakpoints == nil ? steps : Array(steps.dropLast()) }

    /// The last `format` step, whose settings the encoder uses.
    public var formatStep: FormatStep? { steps.compactMap { $0 as? FormatStep }.last }
}
