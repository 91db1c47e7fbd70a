import Foundation
import Testing

/// One fenced example of a documentation page that the doc test runs.
///
/// The convention (docs/architecture.md, "Documentation"): a fence whose info string is
/// `sh runnable`, `sql runnable`, `python runnable` or `go runnable` (optionally `exit=N`) is
/// executed (Python by scripts/test's venv, which holds psycopg and OpenTelemetry's Python SDK;
/// Go as a `main` package against Debian's Go libraries: OpenTelemetry's, lib/pq); a `text output` fence right
/// after it (only blank lines between) is the output it must print, matched by `OutputPattern`.
struct DocExample: Sendable, CustomStringConvertible {
    enum Language: String, Sendable { case sh, sql, python, go }

    var page: String
    /// The 1-based line of the opening fence.
    var line: Int
    var language: Language
    var code: String
    var expectedExit: Int32 = 0
    var expectedOutput: String?

    var description: String { "\(page):\(line)" }
}

/// Page-wide settings, written as `<!-- doctest: NAME -->` anywhere in the page.
enum DocDirective: String, Sendable, CaseIterable {
    /// No `DATABASE_URL`: the page uses the embedded cluster under `./.halcyon`, as a newcomer does.
    case embedded
    /// The page's database is created but not migrated (it shows `halcyon migrate` itself).
    case unmigrated
    /// `halcyon demo` has run in the page's directory before its first example, as a newcomer who
    /// followed the front page has run it: its jobs are in the database, its images and results
    /// in `./.halcyon`.
    case afterDemo = "after-demo"
}

/// A documentation page and its runnable examples.
struct DocPage: Sendable, CustomTestStringConvertible {
    var path: String
    var directives: Set<DocDirective>
    var examples: [DocExample]

    var testDescription: String { path }
}

struct DocFormatError: Error, CustomStringConvertible {
    var page: String
    var line: Int
    var reason: String
    var description: String { "\(page):\(line): \(reason)" }
}

/// Reads fenced code blocks and doc-test directives out of Markdown.
enum DocParser {
    struct Fence {
        var info: String
        var body: String
        var line: Int
        /// The line after the closing fence.
        var end: Int
    }

    /// Every fenced block (``` or ~~~, three or more, indented up to three spaces).
    static func fences(_ text: String) -> [Fence] {
        let lines = text.components(separatedBy: "\n")
        var fences: [Fence] = []
        var i = 0
        while i < lines.count {
            let (indent, rest) = splitIndent(lines[i])
            guard indent <= 3, let marker = rest.first, marker == "`" || marker == "~" else {
                i += 1
                continue
            }
            let run = rest.prefix { $0 == marker }.count
            guard run >= 3 else {
                i += 1
                continue
            }
            let info = rest.dropFirst(run).trimmingCharacters(in: .whitespaces)
            var body: [String] = []
            var j = i + 1
            while j < lines.count {
                let (ci, crest) = splitIndent(lines[j])
                if ci <= 3, crest.prefix(while: { $0 == marker }).count >= run,
                    crest.drop(while: { $0 == marker }).trimmingCharacters(in: .whitespaces).isEmpty
                {
                    break
                }
                // Content loses as much indentation as the opening fence had.
                body.append(String(lines[j].dropFirst(min(indent, splitIndent(lines[j]).0))))
                j += 1
            }
            fences.append(Fence(info: info, body: body.joined(separator: "\n"), line: i + 1, end: j + 2))
            i = j + 1
        }
        return fences
    }

    private static func splitIndent(_ line: String) -> (Int, Substring) {
        let indent = line.prefix { $0 == " " }.count
        return (indent, line.dropFirst(indent))
    }

    /// The page's directives and runnable examples; a malformed marker is an error, not a skip.
    static func page(_ text: String, path: String) throws -> DocPage {
        var directives: Set<DocDirective> = []
        var rest = Substring(text)
        while let open = rest.range(of: "<!-- doctest:") {
            guard let close = rest[open.upperBound...].range(of: "-->") else { break }
            let name = rest[open.upperBound..<close.lowerBound].trimmingCharacters(in: .whitespaces)
            let line = text[..<open.lowerBound].filter { $0 == "\n" }.count + 1
            guard let directive = DocDirective(rawValue: name) else {
                throw DocFormatError(
                    page: path, line: line,
                    reason: "unknown doctest directive '\(name)' (known: \(DocDirective.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            directives.insert(directive)
            rest = rest[close.upperBound...]
        }

        let lines = text.components(separatedBy: "\n")
        let fences = fences(text)
        var examples: [DocExample] = []
        var consumed: Set<Int> = []
        for (n, fence) in fences.enumerated() {
            let words = fence.info.split(separator: " ").map(String.init)
            if fence.info == "text output" {
                guard consumed.contains(n) else {
                    throw DocFormatError(page: path, line: fence.line, reason: "a `text output` block must follow a runnable block")
                }
                continue
            }
            guard words.dropFirst().contains("runnable") else { continue }
            guard let language = DocExample.Language(rawValue: words[0]) else {
                throw DocFormatError(page: path, line: fence.line, reason: "only sh, sql, python and go blocks can be runnable, not '\(words[0])'")
            }
            var example = DocExample(page: path, line: fence.line, language: language, code: fence.body)
            for word in words.dropFirst() where word != "runnable" {
                if word.hasPrefix("exit="), let code = Int32(word.dropFirst(5)) {
                    example.expectedExit = code
                } else {
                    throw DocFormatError(page: path, line: fence.line, reason: "unknown word '\(word)' in '\(fence.info)' (known: runnable, exit=N)")
                }
            }
            if n + 1 < fences.count, fences[n + 1].info == "text output",
                lines[(fence.end - 1)..<(fences[n + 1].line - 1)].allSatisfy({ $0.trimmingCharacters(in: .whitespaces).isEmpty })
            {
                example.expectedOutput = fences[n + 1].body
                consumed.insert(n + 1)
            }
            examples.append(example)
        }
        return DocPage(path: path, directives: directives, examples: examples)
    }
}
