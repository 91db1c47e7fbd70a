import Foundation

/// Whether an example's output matches the `text output` block a page shows for it.
///
/// Lines are compared trimmed, with runs of whitespace as one space and blank lines dropped (so a
/// table's column widths may change); `…` inside a line matches any text; a line that is only `…`
/// matches any number of lines, none included. Everything else must match exactly, whole.
enum OutputPattern {
    static func lines(_ text: String) -> [String] {
        stripANSI(text).components(separatedBy: "\n")
            .map { $0.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" }).joined(separator: " ") }
            .filter { !$0.isEmpty }
    }

    static func matches(expected: String, actual: String) -> Bool {
        let pattern = lines(expected)
        let output = lines(actual)
        // memo[p][o]: does pattern[p...] match output[o...]
        var memo: [[Bool?]] = Array(repeating: Array(repeating: nil, count: output.count + 1), count: pattern.count + 1)
        func match(_ p: Int, _ o: Int) -> Bool {
            if let known = memo[p][o] { return known }
            let result: Bool
            if p == pattern.count {
                result = o == output.count
            } else if pattern[p] == "…" {
                result = match(p + 1, o) || (o < output.count && match(p, o + 1))
            } else {
                result = o < output.count && line(pattern[p], matches: output[o]) && match(p + 1, o + 1)
            }
            memo[p][o] = result
            return result
        }
        return match(0, 0)
    }

    /// One line: the literal pieces between `…` in order, the first at the start, the last at the end.
    static func line(_ pattern: String, matches line: String) -> Bool {
        let pieces = pattern.components(separatedBy: "…")
        guard pieces.count > 1 else { return pattern == line }
        guard line.hasPrefix(pieces[0]) else { return false }
        var rest = line.dropFirst(pieces[0].count)
        for piece in pieces.dropFirst().dropLast() where !piece.isEmpty {
            guard let found = rest.range(of: piece) else { return false }
            rest = rest[found.upperBound...]
        }
        return rest.hasSuffix(pieces.last!)
    }

    private static func stripANSI(_ text: String) -> String {
        text.replacingOccurrences(of: "\u{1B}\\[[0-9;?]*[A-Za-z]", with: "", options: .regularExpression)
    }
}
