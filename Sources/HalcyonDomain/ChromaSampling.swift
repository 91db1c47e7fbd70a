/// How a JPEG's colour (chroma) is sampled against its brightness (luma): what `result_chroma`
/// records. The search of `quality=auto` tries 4:4:4 and 4:2:0.
public enum ChromaSampling: String, Sendable, CaseIterable {
    /// Chroma at full resolution.
    case full = "4:4:4"
    /// Chroma at half resolution both ways (a quarter of the samples).
    case half = "4:2:0"
    /// Chroma at half the width.
    case halfWidth = "4:2:2"
    /// Chroma at half the height.
    case halfHeight = "4:4:0"
    /// One component: no chroma.
    case grey

    /// The sampling a three-component JPEG's luma factors say, its chroma at 1×1; nil for any other.
    public init?(lumaH: Int, lumaV: Int) {
        switch (lumaH, lumaV) {
        case (1, 1): self = .full
        case (2, 2): self = .half
        case (2, 1): self = .halfWidth
        case (1, 2): self = .halfHeight
        default: return nil
        }
    }

    /// The luma's sampling factors for an encoder (chroma at 1×1); nil for `grey`.
    public var lumaFactors: (h: Int, v: Int)? {
        switch self {
        case .full: (1, 1)
        case .half: (2, 2)
        case .halfWidth: (2, 1)
        case .halfHeight: (1, 2)
        case .grey: nil
        }
    }
}
