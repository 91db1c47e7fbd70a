import Foundation
import HalcyonDomain

/// A value written in a chain: `320x240`, `0.5`, `#ff0000`, `fill`.
public enum ChainValue: Sendable, Equatable, CustomStringConvertible {
    case size(width: Int, height: Int)
    case number(Double)
    case color(String)
    case word(String)
    /// A word with numbers in parentheses, such as `fp(0.3, 0.7)`.
    case call(String, [Double])
    /// A number followed by `%`, such as `25%`.
    case percent(Double)
    /// A double-quoted string (`\"` and `\\` escape a quote and a backslash).
    case string(String)

    public var description: String {
        switch self {
        case .size(let w, let h): "\(w)x\(h)"
        case .number(let n): formatNumber(n)
        case .color(let c): c
        case .word(let w): w
        case .call(let name, let numbers): "\(name)(\(numbers.map(formatNumber).joined(separator: ",")))"
        case .percent(let n): "\(formatNumber(n))%"
        case .string(let text): "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
    }
}

/// One argument with where it was written (1-based columns).
public struct ChainArgument: Sendable, Equatable {
    public var key: String?
    public var value: ChainValue
    /// Where the argument starts (its key, when named).
    public var position: Int
    /// Where its value starts.
    public var valuePosition: Int
}

/// A parsed step: `name(positional…, key=value…)`, before its processor validates it.
public struct ChainStep: Sendable, Equatable {
    public var name: String
    public var position: Int
    public var arguments: [ChainArgument]
}

/// A chain syntax or meaning error: where, what was found, what was expected.
public struct ChainError: Error, Sendable, Equatable, CustomStringConvertible {
    public var position: Int
    public var found: String
    public var expected: String

    public var description: String { "at column \(position): expected \(expected), found \(found)" }

    public var halcyonError: HalcyonError { HalcyonError(.invalidChain, description) }
}

/// Parses `step |> step …` (`>>` is an alias). Limits keep hostile chains cheap.
public enum ChainGrammar {
    /// Most steps a chain may have.
    public static let maxSteps = 64

    public static func parse(_ text: String) throws(ChainError) -> [ChainStep] {
        var lexer = Lexer(text)
        var steps: [ChainStep] = []
        var token = try lexer.next()
        if case .end = token.kind { return [] }
        while true {
            guard case .word(let name) = token.kind else {
                throw ChainError(position: token.position, found: token.kind.description, expected: "a step name")
            }
            var step = ChainStep(name: name, position: token.position, arguments: [])
            token = try lexer.next()
            if case .open = token.kind {
                token = try lexer.next()
                if case .close = token.kind {
                    token = try lexer.next()
                } else {
                    while true {
                        let (argument, after) = try parseArgument(first: token, lexer: &lexer)
                        step.arguments.append(argument)
                        if case .comma = after.kind { token = try lexer.next(); continue }
                        guard case .close = after.kind else {
                            throw ChainError(position: after.position, found: after.kind.description, expected: "',' or ')'")
                        }
                        token = try lexer.next()
                        break
                    }
                }
            }
            steps.append(step)
            if steps.count > maxSteps {
                throw ChainError(position: step.position, found: "step \(steps.count)", expected: "at most \(maxSteps) steps")
            }
            switch token.kind {
            case .end: return steps
            case .pipe: token = try lexer.next()
            default: throw ChainError(position: token.position, found: token.kind.description, expected: "'|>' or the end of the chain")
            }
        }
    }

    private static func parseArgument(first: Token, lexer: inout Lexer) throws(ChainError) -> (ChainArgument, Token) {
        var token = first
        var key: String?
        let start = token.position
        if case .word(let w) = token.kind {
            let next = try lexer.next()
            if case .equals = next.kind {
                key = w
                token = try lexer.next()
            } else {
                let (value, after) = try callArguments(w, start: start, next: next, lexer: &lexer)
                return (ChainArgument(key: nil, value: value, position: start, valuePosition: start), after)
            }
        }
        let value: ChainValue
        let after: Token
        switch token.kind {
        case .value(let v): (value, after) = (v, try lexer.next())
        case .word(let w): (value, after) = try callArguments(w, start: token.position, next: try lexer.next(), lexer: &lexer)
        default:
            throw ChainError(position: token.position, found: token.kind.description, expected: key == nil ? "an argument" : "a value for '\(key!)'")
        }
        return (ChainArgument(key: key, value: value, position: start, valuePosition: token.position), after)
    }

    /// Most numbers in a value like `fp(0.3, 0.7)`.
    static let maxCallArguments = 8

    /// A word, or — when `(` follows it — a call of numbers such as `fp(0.3, 0.7)`; returns it
    /// with the token after it.
    private static func callArguments(_ word: String, start: Int, next: Token, lexer: inout Lexer) throws(ChainError) -> (ChainValue, Token) {
        guard case .open = next.kind else { return (.word(word), next) }
        var numbers: [Double] = []
        while true {
            let token = try lexer.next()
            guard case .value(.number(let n)) = token.kind else {
                throw ChainError(position: token.position, found: token.kind.description, expected: "a number in '\(word)(…)'")
            }
            numbers.append(n)
            guard numbers.count <= maxCallArguments else {
                throw ChainError(
                    position: token.position, found: "argument \(numbers.count)", expected: "at most \(maxCallArguments) in '\(word)(…)'")
            }
            let after = try lexer.next()
            switch after.kind {
            case .comma: continue
            case .close: return (.call(word, numbers), try lexer.next())
            default: throw ChainError(position: after.position, found: after.kind.description, expected: "',' or ')' in '\(word)(…)'")
            }
        }
    }
}

struct Token {
    enum Kind: CustomStringConvertible {
        case word(String), value(ChainValue), open, close, comma, equals, pipe, end
        var description: String {
            switch self {
            case .word(let w): "'\(w)'"
            case .value(let v): "'\(v)'"
            case .open: "'('"
            case .close: "')'"
            case .comma: "','"
            case .equals: "'='"
            case .pipe: "'|>'"
            case .end: "the end of the chain"
            }
        }
    }
    var kind: Kind
    var position: Int
}

struct Lexer {
    private let chars: [Character]
    private var index = 0

    init(_ text: String) { chars = Array(text) }

    mutating func next() throws(ChainError) -> Token {
        while index < chars.count, chars[index].isWhitespace { index += 1 }
        let start = index + 1
        guard index < chars.count else { return Token(kind: .end, position: start) }
        let c = chars[index]
        switch c {
        case "(": index += 1; return Token(kind: .open, position: start)
        case ")": index += 1; return Token(kind: .close, position: start)
        case ",": index += 1; return Token(kind: .comma, position: start)
        case "=": index += 1; return Token(kind: .equals, position: start)
        case "|" where peek(1) == ">", ">" where peek(1) == ">":
            index += 2; return Token(kind: .pipe, position: start)
        case "\"":
            return Token(kind: .value(.string(try quoted(start: start))), position: start)
        case "#":
            index += 1
            let hex = take { $0.isHexDigit }
            guard [6, 8].contains(hex.count) else {
                throw ChainError(position: start, found: "'#\(hex)'", expected: "a color #RRGGBB or #RRGGBBAA")
            }
            return Token(kind: .value(.color("#" + hex.lowercased())), position: start)
        default:
            if c.isASCII && (c.isLetter || c == "_") {
                func isWordCharacter(_ c: Character) -> Bool { c.isASCII && (c.isLetter || c.isNumber || c == "_") }
                var word = take(while: isWordCharacter)
                // A list of words, `jpeg|webp|avif`: a `|` between two words (`|>` is the pipe).
                while peek(0) == "|", let next = peek(1), next.isASCII, next.isLetter {
                    index += 1
                    word += "|" + take(while: isWordCharacter)
                }
                return Token(kind: .word(word.lowercased()), position: start)
            }
            if c.isASCII && (c.isNumber || c == "-" || c == "+" || c == ".") {
                let text = take { $0.isASCII && ($0.isNumber || "+-.xXeE".contains($0)) }
                let value = try Self.number(text, position: start)
                if peek(0) == "%", case .number(let n) = value {
                    index += 1
                    return Token(kind: .value(.percent(n)), position: start)
                }
                return Token(kind: .value(value), position: start)
            }
            throw ChainError(position: start, found: "'\(c)'", expected: "a step, an argument or '|>'")
        }
    }

    /// Longest quoted string, in characters.
    static let maxStringLength = 32768

    /// A quoted string from the opening quote at `index`; the lexer ends after the closing one.
    private mutating func quoted(start: Int) throws(ChainError) -> String {
        index += 1
        var text = "", length = 0  // counted here: `text.count` walks the string each time
        while index < chars.count {
            let c = chars[index]
            index += 1
            switch c {
            case "\"": return text
            case "\\":
                guard index < chars.count, chars[index] == "\"" || chars[index] == "\\" else {
                    throw ChainError(
                        position: index, found: "'\\\(index < chars.count ? String(chars[index]) : "")'", expected: "\\\" or \\\\ in a string")
                }
                text.append(chars[index])
                index += 1
            default:
                text.append(c)
            }
            length += 1
            guard length <= Self.maxStringLength else {
                throw ChainError(position: start, found: "a string over \(Self.maxStringLength) characters", expected: "a shorter string")
            }
        }
        throw ChainError(position: start, found: "a string without its closing quote", expected: "'\"'")
    }

    private static func number(_ text: String, position: Int) throws(ChainError) -> ChainValue {
        let lower = text.lowercased()
        if let x = lower.firstIndex(of: "x"), !lower.contains("e") {
            let w = lower[..<x], h = lower[lower.index(after: x)...]
            guard let width = Int(w), let height = Int(h), w.allSatisfy(\.isNumber), h.allSatisfy(\.isNumber) else {
                throw ChainError(position: position, found: "'\(text)'", expected: "a size WxH such as 320x240")
            }
            return .size(width: width, height: height)
        }
        guard let n = Double(text), n.isFinite else {
            throw ChainError(position: position, found: "'\(text)'", expected: "a number")
        }
        return .number(quantised(n))
    }

    /// `n` rounded to the 4 decimals an identifier keeps (`formatNumber`), so that a step does
    /// exactly what its identifier — and the cache key — says: `rotate(0.00001)` is `rotate(0)`,
    /// not a rotation that shares `rotate(0)`'s results. Whole numbers and numbers of at most 4
    /// decimals are unchanged.
    static func quantised(_ n: Double) -> Double {
        let scaled = n * 10_000
        guard scaled.isFinite, abs(scaled) < 1e15 else { return n }
        return scaled.rounded() / 10_000
    }

    private func peek(_ offset: Int) -> Character? {
        index + offset < chars.count ? chars[index + offset] : nil
    }

    private mutating func take(while predicate: (Character) -> Bool) -> String {
        let start = index
        while index < chars.count, predicate(chars[index]) { index += 1 }
        return String(chars[start..<index])
    }
}

/// Numbers in identifiers: integers without a fraction, others with at most 4 decimals and no
/// trailing zeros, so `0.50`, `.5` and `0.5000` all read `0.5`.
package func formatNumber(_ n: Double) -> String {
    if n == n.rounded(), abs(n) < 1e12 { return String(Int64(n)) }
    var s = String(format: "%.4f", n)
    while s.hasSuffix("0") { s.removeLast() }
    if s.hasSuffix(".") { s.removeLast() }
    return s == "-0" ? "0" : s
}
