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

    /// The sampling of a JPEG's bytes, read from its frame header (the segments before it walked
    /// by their lengths); nil when there is none or it is not one of these.
    public init?(jpeg bytes: some Collection<UInt8>) {
        let b = Array(bytes.prefix(1 << 20))
        guard b.count > 4, b[0] == 0xFF, b[1] == 0xD8 else { return nil }
        var i = 2
        while i + 4 <= b.count {
            guard b[i] == 0xFF else { return nil }
            let marker = b[i + 1]
            if marker == 0xFF {
                i += 1
                continue
            }
            let length = Int(b[i + 2]) << 8 | Int(b[i + 3])
            guard length >= 2 else { return nil }
            // SOF0–SOF15 but DHT (C4), JPG (C8) and DAC (CC).
            if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
                let start = i + 4
                guard start + 6 <= b.count else { return nil }
                let components = Int(b[start + 5])
                guard start + 6 + 3 * components <= b.count, components == 1 || components == 3 else { return nil }
                if components == 1 { self = .grey; return }
                let factor = { (c: Int) in b[start + 6 + 3 * c + 1] }
                guard factor(1) == 0x11, factor(2) == 0x11 else { return nil }
                self.init(lumaH: Int(factor(0) >> 4), lumaV: Int(factor(0) & 0x0F))
                return
            }
            if marker == 0xDA || marker == 0xD9 { return nil }
            i += 2 + length
        }
        return nil
    }
}
