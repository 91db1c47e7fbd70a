import Foundation

/// The named statements of a module's query files (`Queries/*.sql`, embedded in the binary), parsed
/// once, at first use.
///
/// A query file holds statements in the manner of sqlc: each starts with a header line
/// `-- name: NAME :KIND` (`one`, `many` or `exec`: what its typed caller expects back), then the
/// comment lines that document it (its `$n` parameters first), then its text, up to and with the
/// first line that ends in `;`. What stands between two statements, and before the first, is
/// comments and blank lines. The text sent is exactly the lines between the documentation and the
/// `;` — not re-indented, not reflowed — so what a file says is what the planner sees.
///
/// Two kinds of `/*NAME*/` in a statement's text:
/// - a **fragment**, written once as `-- fragment: NAME` (then its documentation and its text up
///   to a `;`, like a statement) and put in verbatim, where several statements must say the same
///   (a filter, a SET clause); every fragment is used somewhere;
/// - else a **slot**, which its `Query` fills before sending (`QuerySlot`): only values from a
///   closed set written by the code, never input.
public struct QueryLibrary: Sendable {
    /// What a statement's typed caller expects back.
    public enum Kind: String, Sendable {
        /// At most one row.
        case one
        /// Any number of rows.
        case many
        /// None looked at.
        case exec
    }

    /// One named statement of a file.
    public struct Statement: Sendable, Equatable {
        public var name: String
        public var kind: Kind
        /// The text as sent (its fragments put in; its slots still to fill).
        public var text: String
        /// The file it is in, and its header's line number.
        public var file: String
        public var line: Int
        /// Its slots' names, in order of appearance (`/*states*/` → `states`).
        public var slots: [String]
    }

    /// A file that does not parse, a name used twice, a fragment unknown or unused.
    public struct FileError: Error, CustomStringConvertible, Equatable {
        public var file: String
        public var line: Int
        public var message: String
        public var description: String { "\(file):\(line): \(message)" }
    }

    /// Every statement, by name.
    public let statements: [String: Statement]
    /// The files read, in order.
    public let files: [String]

    /// Parses `files` (name and bytes of each). A file that does not parse is a programming error:
    /// it stops the process at first use (and fails the tests before).
    public init(files: [(name: String, bytes: [UInt8])]) {
        do {
            self.statements = Dictionary(uniqueKeysWithValues: try Self.parse(files).map { ($0.name, $0) })
        } catch {
            preconditionFailure("query files: \(error)")
        }
        self.files = files.map(\.name)
    }

    /// The statement named `name`. An unknown name is a programming error.
    public func statement(_ name: String) -> Statement {
        guard let s = statements[name] else { preconditionFailure("no statement named '\(name)' in \(files.joined(separator: ", "))") }
        return s
    }

    /// A statement or a fragment, as its file has it.
    struct Piece {
        var name: String
        /// Nil for a fragment.
        var kind: Kind?
        var text: String
        var file: String
        var line: Int
    }

    /// The statements of `files`, in order, their fragments put in; throws at the first problem.
    public static func parse(_ files: [(name: String, bytes: [UInt8])]) throws(FileError) -> [Statement] {
        var pieces: [Piece] = []
        var seen: [String: Piece] = [:]
        for file in files {
            for piece in try parse(file: file.name, String(decoding: file.bytes, as: UTF8.self)) {
                if let first = seen[piece.name] {
                    throw FileError(file: piece.file, line: piece.line, message: "'\(piece.name)' is already the name of \(first.file):\(first.line)")
                }
                seen[piece.name] = piece
                pieces.append(piece)
            }
        }
        let fragments = Dictionary(uniqueKeysWithValues: pieces.filter { $0.kind == nil }.map { ($0.name, $0) })
        var used: Set<String> = []
        var out: [Statement] = []
        for piece in pieces {
            guard let kind = piece.kind else { continue }
            var text = piece.text
            // A fragment may hold fragments; a few rounds are plenty, more is a cycle.
            for _ in 0..<8 {
                let included = slots(in: text).filter { fragments[$0] != nil }
                guard !included.isEmpty else { break }
                text = including(fragments, in: text)
                used.formUnion(included)
            }
            let left = slots(in: text)
            if let cycle = left.first(where: { fragments[$0] != nil }) {
                throw FileError(file: piece.file, line: piece.line, message: "fragment '\(cycle)' includes itself")
            }
            out.append(Statement(name: piece.name, kind: kind, text: text, file: piece.file, line: piece.line, slots: left))
        }
        if let unused = pieces.first(where: { $0.kind == nil && !used.contains($0.name) }) {
            throw FileError(file: unused.file, line: unused.line, message: "fragment '\(unused.name)' is used by no statement")
        }
        return out
    }

    static let statementHeader = "-- name:"
    static let fragmentHeader = "-- fragment:"

    /// The statements and fragments of one file.
    static func parse(file: String, _ text: String) throws(FileError) -> [Piece] {
        enum Place { case outside, documentation, text }
        var out: [Piece] = []
        var current: (name: String, kind: Kind?, line: Int)?
        var body: [Substring] = []
        var place = Place.outside
        func finish() throws(FileError) {
            guard let c = current else { return }
            guard place == .outside, var last = body.popLast()?.trimmingWhitespaceAtEnd, last.hasSuffix(";") else {
                throw FileError(file: file, line: c.line, message: "'\(c.name)' has no text ending in ';'")
            }
            last.removeLast()
            out.append(Piece(name: c.name, kind: c.kind, text: (body + [last]).joined(separator: "\n"), file: file, line: c.line))
        }
        // Lines split and trimmed on UTF-8 bytes (ASCII whitespace): the files are parsed at
        // every process's start, and Character-wise scanning cost milliseconds there.
        for (index, bytes) in text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            let line = Substring(bytes)
            let trimmed = line.trimmingWhitespace
            let comment = trimmed.isEmpty || trimmed.hasPrefix("--")
            if trimmed.hasPrefix(statementHeader) || trimmed.hasPrefix(fragmentHeader) {
                try finish()
                current = try parseHeader(trimmed, file: file, line: index + 1)
                body = []
                place = .documentation
                continue
            }
            switch place {
            case .outside:
                guard comment else {
                    let what = current == nil ? "text before the first '-- name:' header" : "text after the statement's ';'"
                    throw FileError(file: file, line: index + 1, message: what)
                }
            case .documentation where comment:
                continue
            case .documentation, .text:
                body.append(line)
                place = trimmed.hasSuffix(";") ? .outside : .text
            }
        }
        try finish()
        return out
    }

    private static func parseHeader(_ line: Substring, file: String, line number: Int) throws(FileError) -> (String, Kind?, Int) {
        let fragment = line.hasPrefix(fragmentHeader)
        let words = line.dropFirst(fragment ? fragmentHeader.count : statementHeader.count).split(separator: " ")
        let kind = words.count == 2 && words[1].hasPrefix(":") ? Kind(rawValue: String(words[1].dropFirst())) : nil
        guard let name = words.first, isName(name), fragment ? words.count == 1 : kind != nil else {
            let expected = fragment ? "-- fragment: NAME" : "-- name: NAME :one|many|exec"
            throw FileError(file: file, line: number, message: "expected '\(expected)', found '\(line)'")
        }
        return (String(name), kind, number)
    }

    private static func isName(_ word: Substring) -> Bool {
        word.first?.isLetter == true && word.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" }
    }

    /// The names in the `/*NAME*/` of `text`, in order (other comments are left out).
    static func slots(in text: String) -> [String] {
        comments(in: text).compactMap { isName($0.name) ? String($0.name) : nil }
    }

    /// Every `/*…*/` of `text`: its whole range and what stands between the markers.
    private static func comments(in text: String) -> [(range: Range<String.Index>, name: Substring)] {
        let utf8 = text.utf8
        var found: [(Range<String.Index>, Substring)] = []
        var i = utf8.startIndex
        func marker(_ first: UInt8, _ second: UInt8, from start: String.Index) -> String.Index? {
            var j = start
            while j < utf8.endIndex {
                let next = utf8.index(after: j)
                if utf8[j] == first, next < utf8.endIndex, utf8[next] == second { return j }
                j = next
            }
            return nil
        }
        while let open = marker(UInt8(ascii: "/"), UInt8(ascii: "*"), from: i) {
            let inside = utf8.index(open, offsetBy: 2)
            guard let close = marker(UInt8(ascii: "*"), UInt8(ascii: "/"), from: inside) else { break }
            i = utf8.index(close, offsetBy: 2)
            found.append((open..<i, Substring(utf8[inside..<close])))
        }
        return found
    }

    /// `text` with each `/*NAME*/` whose name `fragments` has replaced by that fragment's text.
    private static func including(_ fragments: [String: Piece], in text: String) -> String {
        var out = ""
        var last = text.startIndex
        for (range, name) in comments(in: text) {
            guard let fragment = fragments[String(name)] else { continue }
            out += text[last..<range.lowerBound]
            out += fragment.text
            last = range.upperBound
        }
        return last == text.startIndex ? text : out + text[last...]
    }
}

extension Substring {
    /// Without the ASCII whitespace (space, tab, CR, VT, FF) at both ends.
    fileprivate var trimmingWhitespace: Substring {
        let start = utf8.firstIndex { !$0.isASCIIWhitespace } ?? utf8.endIndex
        return Substring(utf8[start...]).trimmingWhitespaceAtEnd
    }

    fileprivate var trimmingWhitespaceAtEnd: Substring {
        guard let last = utf8.lastIndex(where: { !$0.isASCIIWhitespace }) else { return self[endIndex...] }
        return Substring(utf8[...last])
    }
}

extension UInt8 {
    fileprivate var isASCIIWhitespace: Bool { self == 0x20 || (0x09...0x0D).contains(self) }
}
