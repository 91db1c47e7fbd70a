/// Where a fill's or a crop's window sits: a compass anchor, a focal point kept as close to
/// the window's centre as the image allows, or a window chosen from the pixels
/// (`entropy`: the most detail; `attention`: edges, skin tones and saturated colour, as
/// libvips' `attention`).
public enum Gravity: Sendable, Equatable, CustomStringConvertible {
    /// `center`, `north`, … as anchors: x 0 = left, 1 = right; y 0 = top, 1 = bottom.
    case anchor(Compass)
    case focalPoint(x: Double, y: Double)
    case entropy
    case attention

    public enum Compass: String, Sendable, CaseIterable {
        case center, north, south, east, west, north_east, north_west, south_east, south_west

        package var anchor: (x: Double, y: Double) {
            switch self {
            case .center: (0.5, 0.5)
            case .north: (0.5, 0)
            case .south: (0.5, 1)
            case .east: (1, 0.5)
            case .west: (0, 0.5)
            case .north_east: (1, 0)
            case .north_west: (0, 0)
            case .south_east: (1, 1)
            case .south_west: (0, 1)
            }
        }
    }

    public var description: String {
        switch self {
        case .anchor(let c): c.rawValue
        case .focalPoint(let x, let y): "fp(\(formatNumber(x)),\(formatNumber(y)))"
        case .entropy: "entropy"
        case .attention: "attention"
        }
    }

    /// Whether the window depends on the pixels (the others are geometry alone).
    package var readsPixels: Bool { self == .entropy || self == .attention }

    static let spelled = Compass.allCases.map(\.rawValue).joined(separator: "|") + "|entropy|attention|fp(x,y)"

    init(_ argument: ChainArgument) throws(ChainError) {
        switch argument.value {
        case .word("entropy"): self = .entropy
        case .word("attention"): self = .attention
        case .word(let w) where Compass(rawValue: w) != nil: self = .anchor(Compass(rawValue: w)!)
        case .call("fp", let n):
            guard n.count == 2, (0...1).contains(n[0]), (0...1).contains(n[1]) else {
                throw ChainError(
                    position: argument.valuePosition, found: "'\(argument.value)'",
                    expected: "fp(x,y) with x and y from 0 to 1 (a fraction of the image)")
            }
            self = .focalPoint(x: n[0], y: n[1])
        default:
            throw ChainError(position: argument.valuePosition, found: "'\(argument.value)'", expected: "a gravity: \(Self.spelled)")
        }
    }

    /// The window's top-left corner for a `window`-sized window in an image of `size`, for the
    /// gravities that need no pixels.
    package func origin(of window: ImageSize, in size: ImageSize) -> (x: Int, y: Int) {
        let freeX = Double(size.width - window.width), freeY = Double(size.height - window.height)
        switch self {
        case .anchor(let c):
            return (Int((freeX * c.anchor.x).rounded()), Int((freeY * c.anchor.y).rounded()))
        case .focalPoint(let fx, let fy):
            // Centre the point, then slide back inside the image.
            let x = fx * Double(size.width) - Double(window.width) / 2, y = fy * Double(size.height) - Double(window.height) / 2
            return (Int(min(max(0, x), freeX).rounded()), Int(min(max(0, y), freeY).rounded()))
        case .entropy, .attention:
            return (Int(freeX / 2), Int(freeY / 2))
        }
    }
}

extension StepArguments {
    /// A `gravity=` argument, nil when absent.
    mutating func gravity(_ key: String) throws(ChainError) -> Gravity? {
        guard let a = take(key) else { return nil }
        return try Gravity(a)
    }
}
