import HalcyonDomain

/// One step of a chain (Kingfisher's `ImageProcessor`): a canonical `identifier` that names
/// exactly what it does, and a `process` step on the job's single MagickWand.
public protocol ImageProcessor: Sendable {
    /// The step's name in the chain grammar.
    static var name: String { get }
    /// Builds the processor from a parsed step, validating every argument.
    init(step: ChainStep) throws(ChainError)
    /// Canonical form: every parameter explicit, fixed order, normalised numbers.
    var identifier: String { get }
    /// Applies the step. Runs on a Dispatch thread that owns `image`.
    func process(_ image: MagickImage) throws(HalcyonError)
    /// The size of each frame the step makes from frames of `input`, worked out before it runs
    /// so that the pixel budget is checked before anything is allocated. Most steps keep the
    /// size (the default).
    func outputSize(from input: ImageSize) -> ImageSize
    /// Estimated work of the step on one frame of `input`, in pixel-taps (samples read per
    /// output pixel, summed), for the plan's cost check. Default: each input and output pixel
    /// read a few times.
    func work(from input: ImageSize) -> Double
}

extension ImageProcessor {
    public func outputSize(from input: ImageSize) -> ImageSize { input }
    public func work(from input: ImageSize) -> Double { 4 * (Double(input.pixels) + Double(outputSize(from: input).pixels)) }
}

/// A frame's width and height in pixels.
public struct ImageSize: Sendable, Equatable, CustomStringConvertible {
    public var width: Int
    public var height: Int

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    public var pixels: Int { width * height }
    public var description: String { "\(width)x\(height)" }
}

/// How a chain starts shrinking, if it does: the smallest decode size that loses nothing,
/// used as the `jpeg:size` shrink-on-load hint.
protocol ShrinkingProcessor: ImageProcessor {
    /// The width and height the decoded image must keep at least (in either orientation).
    var minimumDecodeSize: (width: Int, height: Int) { get }
}

/// A step without arguments: its identifier is its name.
protocol PlainProcessor: ImageProcessor {
    init()
}

extension PlainProcessor {
    public init(step: ChainStep) throws(ChainError) {
        try StepArguments(step, keys: []).finish()
        self.init()
    }

    public var identifier: String { Self.name }
}

/// A step whose one argument is a radius in pixels, 0.1–100.
protocol RadiusProcessor: ImageProcessor {
    var radius: Double { get }
    init(radius: Double)
}

extension RadiusProcessor {
    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["radius"])
        let radius = try a.number("radius", range: 0.1...100)
        try a.finish()
        self.init(radius: radius)
    }

    public var identifier: String { "\(Self.name)(\(formatNumber(radius)))" }

    /// A separable Gaussian: its kernel's width, once along rows and once along columns.
    public func work(from input: ImageSize) -> Double { Double(input.pixels) * Double(2 * SeparableGaussian.width(sigma: radius)) }
}
