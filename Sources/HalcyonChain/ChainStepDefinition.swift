/// One step of a chain as the grammar knows it (Kingfisher's `ImageProcessor`, without the
/// pixels): its parameters, validated from a parsed `ChainStep`, and a canonical `identifier`
/// that names exactly what it does. HalcyonImage's `ImageProcessor` adds the work on pixels.
public protocol ChainStepDefinition: Sendable {
    /// The step's name in the chain grammar.
    static var name: String { get }
    /// Builds the step from a parsed one, validating every argument.
    init(step: ChainStep) throws(ChainError)
    /// Canonical form: every parameter explicit, fixed order, normalised numbers. Part of every
    /// result key: a step's identifier never changes for a chain that already parses.
    var identifier: String { get }
    /// The size of each frame the step makes from frames of `input`, worked out before it runs
    /// so that the pixel budget is checked before anything is allocated. Most steps keep the
    /// size (the default).
    func outputSize(from input: ImageSize) -> ImageSize
}

extension ChainStepDefinition {
    public func outputSize(from input: ImageSize) -> ImageSize { input }
}

/// A step without arguments: its identifier is its name.
protocol PlainStep: ChainStepDefinition {
    init()
}

extension PlainStep {
    public init(step: ChainStep) throws(ChainError) {
        try StepArguments(step, keys: []).finish()
        self.init()
    }

    public var identifier: String { Self.name }
}

/// A step whose one argument is a radius in pixels, 0.1–100.
protocol RadiusStep: ChainStepDefinition {
    var radius: Double { get }
    init(radius: Double)
}

extension RadiusStep {
    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["radius"])
        let radius = try a.number("radius", range: 0.1...100)
        try a.finish()
        self.init(radius: radius)
    }

    public var identifier: String { "\(Self.name)(\(formatNumber(radius)))" }
}
