/// `trim(fuzz=0)` — removes a uniform border: every edge row and column of the corners' colour
/// (within `fuzz`, 0–1 of the full range) goes. An image of one colour is left as it is.
public struct TrimStep: ChainStepDefinition {
    public static let name = "trim"
    public var fuzz: Double

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["fuzz"])
        fuzz = try a.number("fuzz", default: 0, range: 0...1)
        try a.finish()
    }

    public var identifier: String { "trim(fuzz=\(formatNumber(fuzz)))" }
}

/// `pad(WxH, color=transparent, gravity=center)` (alias `extend`) — grows the canvas to at
/// least WxH (never crops), the image placed by a compass `gravity`, the new area `color`.
public struct PadStep: ChainStepDefinition {
    public static let name = "pad"
    public var width: Int
    public var height: Int
    public var color: Color
    public var gravity: Gravity.Compass

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["size", "color", "gravity"])
        (width, height) = try a.size("size")
        color = try a.color("color", default: Color(red: 0, green: 0, blue: 0, alpha: 0))
        gravity = try a.choice("gravity", default: Gravity.Compass.center)
        try a.finish()
    }

    public var identifier: String { "pad(\(width)x\(height),color=\(color),gravity=\(gravity.rawValue))" }

    public func outputSize(from input: ImageSize) -> ImageSize {
        ImageSize(width: max(width, input.width), height: max(height, input.height))
    }
}

/// `border(N, color=black)` — Kingfisher's `BorderImageProcessor`: an N px border painted over
/// the image's edges (its size stays), in `color` with the colour's own alpha.
public struct BorderStep: ChainStepDefinition {
    public static let name = "border"
    public var width: Int
    public var color: Color

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["width", "color"])
        width = Int(try a.number("width", range: 1...4096).rounded())
        color = try a.color("color", default: Color(red: 0, green: 0, blue: 0))
        try a.finish()
    }

    public var identifier: String { "border(\(width),color=\(color))" }
}
