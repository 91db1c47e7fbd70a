import HalcyonChain
import HalcyonDomain

/// A chain step (`ChainStepDefinition`: its name, parameters and identifier) with the work it
/// does on the job's single MagickWand. Every step the grammar registers is one (each step type
/// conforms in this module; `ProcessorChain` is built from a parsed `Chain`).
public protocol ImageProcessor: ChainStepDefinition {
    /// Applies the step. Runs on a Dispatch thread that owns `image`.
    func process(_ image: MagickImage) throws(HalcyonError)
    /// Estimated work of the step on one frame of `input`, in pixel-taps (samples read per
    /// output pixel, summed), for the plan's cost check. Default: each input and output pixel
    /// read a few times.
    func work(from input: ImageSize) -> Double
}

extension ImageProcessor {
    public func work(from input: ImageSize) -> Double { 4 * (Double(input.pixels) + Double(outputSize(from: input).pixels)) }
}

/// How a chain starts shrinking, if it does: the smallest decode size that loses nothing,
/// used as the `jpeg:size` shrink-on-load hint.
protocol ShrinkingProcessor: ImageProcessor {
    /// The width and height the decoded image must keep at least (in either orientation).
    var minimumDecodeSize: (width: Int, height: Int) { get }
}

/// A step whose one argument is a radius in pixels (`blur`, `sharpen`): a separable Gaussian.
protocol RadiusProcessor: ImageProcessor {
    var radius: Double { get }
}

extension RadiusProcessor {
    /// A separable Gaussian: its kernel's width, once along rows and once along columns.
    public func work(from input: ImageSize) -> Double { Double(input.pixels) * Double(2 * SeparableGaussian.width(sigma: radius)) }
}
