/// JSON text to and from `JSONValue` without Foundation's coders: a worker reads and writes
/// JSON for every job (options, results, key records), and `JSONDecoder` spent most of a store
/// hit's CPU trying each `Codable` case in turn. The output is byte for byte what `JSONEncoder`
/// writes with `.sortedKeys` and `.withoutEscapingSlashes` (tests compare them).
enum JSONText {
    /// Arrays and objects nested deeper than this are refused (as `JSONDecoder` does at 512).
    static let maxDepth = 512

    // MARK: Writing

    static func write(_ value: JSONValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): writeNumber(n, to: &out)
        case .string(let s): writeString(s, to: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, element) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(element, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            // JSONEncoder's `.sortedKeys` order: the keys' UTF-8 bytes.
            for (i, key) in o.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                write(o[key]!, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Whole numbers below 10^15 as integers; others as Swift prints a `Double`, without a
    /// trailing `.0`; NaN and infinities (which JSON cannot hold) as `null`.
    static func writeNumber(_ n: Double, to out: inout [UInt8]) {
        guard n.isFinite else { return out.append(contentsOf: "null".utf8) }
        if n == n.rounded(), abs(n) < 1e15 {
            out.append(contentsOf: String(Int64(n)).utf8)
        } else {
            var text = n.description
            if text.hasSuffix(".0") { text.removeLast(2) }
            out.append(contentsOf: text.utf8)
        }
    }

    static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings need no escape: one copy.
        if !s.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            out.append(contentsOf: s.utf8)
            return out.append(UInt8(ascii: "\""))
        }
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
            case 0x08: out.append(contentsOf: #"\b"#.utf8)
            case 0x0C: out.append(contentsOf: #"\f"#.utf8)
            case 0x0A: out.append(contentsOf: #"\n"#.utf8)
            case 0x0D: out.append(contentsOf: #"\r"#.utf8)
            case 0x09: out.append(contentsOf: #"\t"#.utf8)
            case 0x00..<0x20:
                out.append(contentsOf: #"\u00"#.utf8)
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    // MARK: Reading

    /// Parses RFC 8259 JSON text (any value at the top, whitespace around it); nil for anything
    /// else, for numbers a `Double` cannot hold, unpaired surrogates and nesting past `maxDepth`.
    static func parse(_ text: String) -> JSONValue? {
        var text = text
        return text.withUTF8 { bytes in
            var reader = Reader(bytes: bytes)
            guard let value = reader.value(depth: 0) else { return nil }
            reader.skipWhitespace()
            return reader.position == bytes.count ? value : nil
        }
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var position = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        var current: UInt8? { position < bytes.count ? bytes[position] : nil }

        mutating func skipWhitespace() {
            while let b = current, b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 { position += 1 }
        }

        mutating func consume(_ literal: String) -> Bool {
            for expected in literal.utf8 {
                guard current == expected else { return false }
                position += 1
            }
            return true
        }

        mutating func value(depth: Int) -> JSONValue? {
            skipWhitespace()
            guard let b = current else { return nil }
            switch b {
            case UInt8(ascii: "{"): return object(depth: depth + 1)
            case UInt8(ascii: "["): return array(depth: depth + 1)
            case UInt8(ascii: "\""): return string().map(JSONValue.string)
            case UInt8(ascii: "t"): return consume("true") ? .bool(true) : nil
            case UInt8(ascii: "f"): return consume("false") ? .bool(false) : nil
            case UInt8(ascii: "n"): return consume("null") ? .null : nil
            default: return number().map(JSONValue.number)
            }
        }

        mutating func array(depth: Int) -> JSONValue? {
            guard depth <= JSONText.maxDepth else { return nil }
            position += 1
            var elements: [JSONValue] = []
            skipWhitespace()
            if current == UInt8(ascii: "]") {
                position += 1
                return .array(elements)
            }
            while true {
                guard let element = value(depth: depth) else { return nil }
                elements.append(element)
                skipWhitespace()
                switch current {
                case UInt8(ascii: ","): position += 1
                case UInt8(ascii: "]"):
                    position += 1
                    return .array(elements)
                default: return nil
                }
            }
        }

        mutating func object(depth: Int) -> JSONValue? {
            guard depth <= JSONText.maxDepth else { return nil }
            position += 1
            var members: [String: JSONValue] = [:]
            skipWhitespace()
            if current == UInt8(ascii: "}") {
                position += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard current == UInt8(ascii: "\""), let key = string() else { return nil }
                skipWhitespace()
                guard current == UInt8(ascii: ":") else { return nil }
                position += 1
                guard let member = value(depth: depth) else { return nil }
                members[key] = member
                skipWhitespace()
                switch current {
                case UInt8(ascii: ","): position += 1
                case UInt8(ascii: "}"):
                    position += 1
                    return .object(members)
                default: return nil
                }
            }
        }

        /// At the opening quote.
        mutating func string() -> String? {
            position += 1
            let start = position
            // The common case: no escapes, one copy.
            while let b = current, b != UInt8(ascii: "\""), b != UInt8(ascii: "\\") {
                guard b >= 0x20 else { return nil }
                position += 1
            }
            guard let stop = current else { return nil }
            if stop == UInt8(ascii: "\"") {
                position += 1
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position - 1]), as: UTF8.self)
            }
            var out = Array(bytes[start..<position])
            while let b = current {
                position += 1
                switch b {
                case UInt8(ascii: "\""): return String(decoding: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard let e = current else { return nil }
                    position += 1
                    switch e {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        guard let scalar = unicodeEscape() else { return nil }
                        out.append(contentsOf: String(Character(scalar)).utf8)
                    default: return nil
                    }
                case 0x00..<0x20: return nil
                default: out.append(b)
                }
            }
            return nil
        }

        /// After a `\u`: four hex digits; a high surrogate must be followed by a second `\u`
        /// escape holding the low one.
        mutating func unicodeEscape() -> Unicode.Scalar? {
            guard let first = hex4() else { return nil }
            switch first {
            case 0xD800..<0xDC00:
                guard consume("\\u"), let second = hex4(), (0xDC00..<0xE000).contains(second) else { return nil }
                return Unicode.Scalar(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
            case 0xDC00..<0xE000: return nil
            default: return Unicode.Scalar(first)
            }
        }

        mutating func hex4() -> UInt32? {
            var v: UInt32 = 0
            for _ in 0..<4 {
                guard let b = current else { return nil }
                let digit: UInt8
                switch b {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
                default: return nil
                }
                v = v << 4 | UInt32(digit)
                position += 1
            }
            return v
        }

        /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, finite as a `Double`.
        mutating func number() -> Double? {
            let start = position
            if current == UInt8(ascii: "-") { position += 1 }
            guard let first = current, isDigit(first) else { return nil }
            position += 1
            if first != UInt8(ascii: "0") { skipDigits() }
            if current == UInt8(ascii: ".") {
                position += 1
                guard let d = current, isDigit(d) else { return nil }
                skipDigits()
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                position += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
                guard let d = current, isDigit(d) else { return nil }
                skipDigits()
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
            guard let n = Double(text), n.isFinite else { return nil }
            return n
        }

        mutating func skipDigits() {
            while let b = current, isDigit(b) { position += 1 }
        }

        func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
    }
}
