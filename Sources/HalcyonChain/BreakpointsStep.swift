import HalcyonDomain

/// `breakpoints(min_width=320, max_width=1600, bytes_step=20000, max_images=8,
/// formats=avif|webp|jpeg, min_score=80)` — a picture set: the chain's image at the widths where
/// its bytes change enough to matter, each in every format of `formats`, each at the lowest
/// quality that scores at least `min_score` (SSIMULACRA2, as `format(…, quality=auto)`).
///
/// The widths are found by encoding: from `min_width`, each next width is the narrowest whose
/// output (in the format of the most bytes at `max_width`) is at least `bytes_step` bytes larger
/// than the one below, up to `max_width` (capped at the image's own width: never upscaled), which
/// is always the last. `max_images` wins where both cannot hold: the step is then widened to fit.
/// The last step of a chain, and a chain with it has no `format` step (it names its own
/// formats). `formats` lists the `<source>` order of the page's `<picture>`; the last is the
/// `<img>` every browser reads, so `jpeg` belongs last.
public struct BreakpointsStep: ChainStepDefinition {
    public static let name = "breakpoints"
    public var minWidth: Int
    public var maxWidth: Int
    public var bytesStep: Int
    public var maxImages: Int
    public var formats: [FormatStep.Format]
    public var minScore: Double

    public static let defaultMinWidth = 320
    public static let defaultMaxWidth = 1600
    public static let defaultBytesStep = 20_000
    public static let defaultMaxImages = 8
    public static let widthRange = 16...8192
    public static let bytesStepRange = 1000...10_000_000
    public static let maxImagesRange = 1...20
    /// The formats a set may hold, in the order a page lists them by default.
    public static let defaultFormats: [FormatStep.Format] = [.avif, .webp, .jpeg]
    public static let allowedFormats: [FormatStep.Format] = [.avif, .webp, .jxl, .jpeg]

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["min_width", "max_width", "bytes_step", "max_images", "formats", "min_score"])
        func whole(_ key: String, _ value: Int, _ range: ClosedRange<Int>) throws(ChainError) -> Int {
            Int(try a.number(key, default: Double(value), range: Double(range.lowerBound)...Double(range.upperBound)).rounded())
        }
        minWidth = try whole("min_width", Self.defaultMinWidth, Self.widthRange)
        maxWidth = try whole("max_width", max(Self.defaultMaxWidth, minWidth), Self.widthRange)
        bytesStep = try whole("bytes_step", Self.defaultBytesStep, Self.bytesStepRange)
        maxImages = try whole("max_images", Self.defaultMaxImages, Self.maxImagesRange)
        // As written: the `<picture>`'s order, the fallback last.
        formats = try a.choices("formats", allowed: Self.allowedFormats, default: Self.defaultFormats, asWritten: true)
        minScore = try a.number("min_score", default: FormatStep.defaultMinScore, range: FormatStep.minScoreRange)
        guard minWidth <= maxWidth else {
            throw ChainError(
                position: step.position, found: "min_width=\(minWidth) above max_width=\(maxWidth)", expected: "min_width ≤ max_width")
        }
        try a.finish()
    }

    public var identifier: String {
        "breakpoints(min_width=\(minWidth),max_width=\(maxWidth),bytes_step=\(bytesStep),max_images=\(maxImages),"
            + "formats=\(formats.map(\.rawValue).joined(separator: "|")),min_score=\(formatNumber(minScore)))"
    }

    /// The largest rung: `max_width` wide (the image's own width when narrower).
    public func outputSize(from input: ImageSize) -> ImageSize { Self.rungSize(width: min(maxWidth, input.width), of: input) }

    /// The format of the page's `<img>`: the last listed.
    public var fallback: FormatStep.Format { formats[formats.count - 1] }

    /// A rung `width` wide of an image of `input` (its height in proportion, at least 1).
    public static func rungSize(width: Int, of input: ImageSize) -> ImageSize {
        let w = max(1, min(width, input.width))
        let h = max(1, Int((Double(input.height) * Double(w) / Double(max(1, input.width))).rounded()))
        return ImageSize(width: w, height: h)
    }

    /// The `format` step of every rung in `format`: the perceptual search at `min_score`.
    public func formatText(_ format: FormatStep.Format) -> String {
        "format(\(format.rawValue),quality=auto,min_score=\(formatNumber(minScore)))"
    }

    /// The steps one rung is the output of, after the steps before this one: a resize to
    /// `width` and the rung's `format` step. A job asking for that chain is a store hit on the
    /// rung: a rung is stored under its key.
    public func rungText(width: Int, format: FormatStep.Format) -> String {
        "resize(\(width)x16384,mode=fit) |> \(formatText(format))"
    }

    /// The chain of one rung: `steps` (the chain's before this one) then `rungText`.
    public static func rungChain(
        before steps: [any ChainStepDefinition], width: Int, format: FormatStep.Format, of step: BreakpointsStep
    )
        throws(HalcyonError) -> Chain
    {
        let prefix = steps.map(\.identifier).joined(separator: " |> ")
        return try Chain.parse((prefix.isEmpty ? "" : prefix + " |> ") + step.rungText(width: width, format: format))
    }
}
