/// A frame's width and height in pixels.
public struct ImageSize: Sendable, Equatable, CustomStringConvertible {
    public var width: Int
    public var height: Int

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    /// Its area, width × height.
    public var pixels: Int { width * height }
    public var description: String { "\(width)x\(height)" }
}
