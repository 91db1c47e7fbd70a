/// A colour written `#RRGGBB`, `#RRGGBBAA` or as a CSS name; canonically `#rrggbbaa`.
public struct Color: Sendable, Equatable, CustomStringConvertible {
    public var red: UInt8, green: UInt8, blue: UInt8, alpha: UInt8

    /// The CSS names understood (a common subset), with their hex values.
    static let names: [String: String] = {
        let table = """
            black 000000 white ffffff red ff0000 green 008000 blue 0000ff yellow ffff00 cyan 00ffff aqua 00ffff
            magenta ff00ff fuchsia ff00ff gray 808080 grey 808080 silver c0c0c0 maroon 800000 olive 808000
            lime 00ff00 teal 008080 navy 000080 purple 800080 orange ffa500 pink ffc0cb brown a52a2a gold ffd700
            indigo 4b0082 violet ee82ee coral ff7f50 salmon fa8072 beige f5f5dc ivory fffff0 khaki f0e68c
            crimson dc143c tomato ff6347 orchid da70d6 plum dda0dd tan d2b48c chocolate d2691e skyblue 87ceeb
            transparent 00000000
            """
        let words = table.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
        return Dictionary(uniqueKeysWithValues: stride(from: 0, to: words.count, by: 2).map { (words[$0], words[$0 + 1]) })
    }()

    public init(red: UInt8, green: UInt8, blue: UInt8, alpha: UInt8 = 255) {
        self.red = red; self.green = green; self.blue = blue; self.alpha = alpha
    }

    /// Parses a chain value: a `#…` colour or a CSS name.
    init?(_ value: ChainValue) {
        let hex: String
        switch value {
        case .color(let c): hex = String(c.dropFirst())
        case .word(let w):
            guard let h = Self.names[w] else { return nil }
            hex = h
        default: return nil
        }
        guard let v = UInt32(hex, radix: 16), hex.count == 6 || hex.count == 8 else { return nil }
        let full = hex.count == 6 ? v << 8 | 0xFF : v
        self.init(red: UInt8(full >> 24), green: UInt8((full >> 16) & 0xFF), blue: UInt8((full >> 8) & 0xFF), alpha: UInt8(full & 0xFF))
    }

    public var description: String {
        "#" + [red, green, blue, alpha].map { String($0, radix: 16).leftPadded(2) }.joined()
    }
}

extension String {
    /// The string with zeros before it, `n` characters at least (`"f".leftPadded(2)` is `0f`).
    package func leftPadded(_ n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
}
