import Foundation
import Testing

@testable import HalcyonRuntime

/// `JSONValue`'s own reader and writer against Foundation's coders, which they replaced.
@Suite struct JSONTextTests {
    /// What `jsonText` was before: `JSONEncoder` with sorted keys, slashes unescaped.
    static func foundationText(_ v: JSONValue) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try! encoder.encode(v), as: UTF8.self)
    }

    static func foundationParse(_ text: String) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    /// A seeded generator of values with the awkward parts: control characters, quotes,
    /// backslashes, slashes, non-ASCII and astral characters, keys that sort differently by
    /// bytes and by characters, integers, fractions, tiny and huge numbers.
    struct Generator {
        var state: UInt64

        mutating func next(_ n: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(n))
        }

        static let pieces = [
            "a", "Z", "0", " ", "\"", "\\", "/", "\n", "\r", "\t", "\u{8}", "\u{C}", "\u{0}", "\u{1F}", "\u{7F}", "é", "e\u{301}",
            "ß", "€", "😀", "\u{2028}", "<", "&", "key", "Key", "_",
        ]

        mutating func string() -> String { (0..<next(6)).map { _ in Self.pieces[next(Self.pieces.count)] }.joined() }

        mutating func number() -> Double {
            switch next(7) {
            case 0: return Double(next(2_000_001) - 1_000_000)
            case 1: return Double(next(1_000_000)) / 1000
            case 2: return -Double(next(1_000_000)) * 1e-9
            case 3: return Double(next(1000)) * 1e17
            case 4: return 1e15 + Double(next(1000))
            case 5: return Double(next(100)) / 3
            default: return 0.1 * Double(next(50))
            }
        }

        mutating func value(depth: Int = 0) -> JSONValue {
            switch next(depth > 3 ? 4 : 6) {
            case 0: return .null
            case 1: return .bool(next(2) == 0)
            case 2: return .number(number())
            case 3: return .string(string())
            case 4: return .array((0..<next(5)).map { _ in value(depth: depth + 1) })
            default:
                var o: [String: JSONValue] = [:]
                for _ in 0..<next(5) { o[string()] = value(depth: depth + 1) }
                return .object(o)
            }
        }
    }

    @Test func writesWhatJSONEncoderWrote() {
        var g = Generator(state: 17)
        for _ in 0..<3000 {
            let v = g.value()
            #expect(v.jsonText == Self.foundationText(v), "\(v)")
        }
    }

    @Test func readsWhatItWritesAndWhatJSONDecoderReads() {
        var g = Generator(state: 29)
        for _ in 0..<3000 {
            let v = g.value()
            let text = v.jsonText
            #expect(JSONValue.parse(text) == v, "\(text)")
            #expect(JSONValue.parse(text) == Self.foundationParse(text), "\(text)")
            let pretty = v.prettyText
            #expect(JSONValue.parse(pretty) == v, "\(pretty)")
        }
    }

    @Test(arguments: [
        "", " ", "01", "-", "-01", "1.", ".5", "+1", "1e", "1e+", "0x10", "NaN", "Infinity", "1e400", "-1e400", "[1,]", "[,1]",
        "[1 2]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "{1:2}", "{\"a\":}", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u12G4\"",
        "\"\u{1}\"", "\"a\nb\"", "nul", "tru", "falsey", "[", "]", "{", "}", "[1]]", "1 2", "\"\\ud800\"", "\"\\udc00\"",
        "\"\\ud800\\u0041\"", "\u{FEFF}1",
    ])
    func refusesWhatIsNotJSON(_ text: String) {
        #expect(JSONValue.parse(text) == nil)
    }

    @Test(arguments: [
        " [1, 2.5e3, -0.0, 1E-2, true, false, null] ", "\"\\ud83d\\ude00 \\u00e9 \\/ \\\\ \\\" \\b\\f\\n\\r\\t\"", "{\"a\":{\"b\":[]}}",
        "\t\r\n{} ", "0", "-0", "\"\"", "123456789012345678901234567890",
    ])
    func readsWhatJSONDecoderReads(_ text: String) {
        let mine = JSONValue.parse(text)
        #expect(mine != nil)
        #expect(mine == Self.foundationParse(text))
    }

    /// A repeated key keeps its last value, as PostgreSQL's `jsonb` does (and where every
    /// job's options come from); `JSONDecoder` kept the first.
    @Test func aRepeatedKeyKeepsItsLastValue() {
        #expect(JSONValue.parse(#"{"k":1,"k":2}"#) == ["k": 2])
    }

    @Test func boundsNesting() {
        let ok = String(repeating: "[", count: JSONText.maxDepth) + String(repeating: "]", count: JSONText.maxDepth)
        #expect(JSONValue.parse(ok) != nil)
        let deep = String(repeating: "[", count: JSONText.maxDepth + 1) + String(repeating: "]", count: JSONText.maxDepth + 1)
        #expect(JSONValue.parse(deep) == nil)
        // Far too deep is refused at the bound, not by running out of stack.
        #expect(JSONValue.parse(String(repeating: "{\"a\":", count: 100_000)) == nil)
    }

    @Test func writesNonFiniteNumbersAsNull() {
        #expect(JSONValue.array([.number(.nan), .number(.infinity), .number(1)]).jsonText == "[null,null,1]")
    }
}
