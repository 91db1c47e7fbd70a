import HalcyonRuntime

/// A placeholder a job can ask for (`options.placeholders`), computed from its result's pixels.
public enum PlaceholderKind: String, Sendable, CaseIterable, Comparable {
    case blurhash, thumbhash, dominant_color

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

/// What a job asked for: the kinds, and BlurHash's component counts.
public struct PlaceholderRequest: Sendable, Equatable {
    public var kinds: Set<PlaceholderKind>
    /// BlurHash components across and down, 1–9 each.
    public var blurhashX: Int = 4
    public var blurhashY: Int = 3

    public init(kinds: Set<PlaceholderKind>, blurhashX: Int = 4, blurhashY: Int = 3) {
        self.kinds = kinds
        self.blurhashX = blurhashX
        self.blurhashY = blurhashY
    }

    /// Only the kinds this request asks for, of `found`.
    public func select(from found: Placeholders?) -> Placeholders? {
        guard let found else { return nil }
        return Placeholders(
            blurhash: kinds.contains(.blurhash) ? found.blurhash : nil, thumbhash: kinds.contains(.thumbhash) ? found.thumbhash : nil,
            dominantColor: kinds.contains(.dominant_color) ? found.dominantColor : nil)
    }

    /// Whether `found` holds everything this request asks for (a stored result's placeholders
    /// serve a hit only then).
    public func isSatisfied(by found: Placeholders?) -> Bool {
        guard let found else { return kinds.isEmpty }
        for kind in kinds {
            switch kind {
            case .blurhash:
                guard let hash = found.blurhash, let (x, y) = Placeholders.blurhashComponents(hash), x == blurhashX, y == blurhashY else {
                    return false
                }
            case .thumbhash: guard found.thumbhash != nil else { return false }
            case .dominant_color: guard found.dominantColor != nil else { return false }
            }
        }
        return true
    }
}

/// The `placeholders` object of a row: a BlurHash string, a ThumbHash (base64) and the
/// dominant colour (`#rrggbb`), each present when asked for.
public struct Placeholders: Sendable, Equatable {
    public var blurhash: String?
    public var thumbhash: String?
    public var dominantColor: String?

    public init(blurhash: String? = nil, thumbhash: String? = nil, dominantColor: String? = nil) {
        self.blurhash = blurhash
        self.thumbhash = thumbhash
        self.dominantColor = dominantColor
    }

    public var json: JSONValue {
        var m: [String: JSONValue] = [:]
        if let blurhash { m["blurhash"] = .string(blurhash) }
        if let thumbhash { m["thumbhash"] = .string(thumbhash) }
        if let dominantColor { m["dominant_color"] = .string(dominantColor) }
        return .object(m)
    }

    public init?(jsonText: String) {
        guard let value = JSONValue.parse(jsonText) else { return nil }
        self.init(json: value)
    }

    public init?(json: JSONValue) {
        guard case .object = json else { return nil }
        blurhash = json["blurhash"]?.stringValue
        thumbhash = json["thumbhash"]?.stringValue
        dominantColor = json["dominant_color"]?.stringValue
    }

    /// BlurHash's base-83 digits.
    public static let base83: [UInt8] = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz#$%*+,-.:;=?@[]^_{|}~".utf8)

    /// The component counts a BlurHash's first character encodes.
    public static func blurhashComponents(_ hash: String) -> (Int, Int)? {
        guard let first = hash.utf8.first, let n = base83.firstIndex(of: first) else { return nil }
        return (n % 9 + 1, n / 9 + 1)
    }
}
