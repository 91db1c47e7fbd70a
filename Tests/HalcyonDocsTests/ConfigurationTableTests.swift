import Foundation
import HalcyonRuntime
import Testing

/// docs/operating.md's table of worker options says each one's default; the worker's own help
/// (docs/cli/work.md, checked against the binary) is where defaults come from. Every default the
/// table states as a value — a duration, a size, a number, a pixel count — is the help's.
struct ConfigurationTableTests {
    /// Each option of `halcyon work`'s help page (docs/cli/work.md) with its help text on one line,
    /// in the page's order (an option named twice keeps both).
    static func helpEntries() throws -> [(option: String, text: String)] {
        let page = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/cli/work.md"), encoding: .utf8)
        var entries: [(option: String, text: String)] = []
        for line in page.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("  --") {
                let option = line.dropFirst(2).split(separator: " ").first.map { String($0.split(separator: "/").first ?? $0) } ?? ""
                entries.append((option, String(line)))
            } else if !entries.isEmpty {
                entries[entries.count - 1].text += " " + line.trimmingCharacters(in: .whitespaces)
            }
        }
        return entries
    }

    /// `--lease` → `30s`, from the help's "(default: …)".
    static func helpDefaults() throws -> [String: String] {
        var defaults: [String: String] = [:]
        for (option, text) in try helpEntries() {
            guard let range = text.range(of: #"\(default: ([^)]*)\)"#, options: .regularExpression) else { continue }
            defaults[option] = String(text[range].dropFirst("(default: ".count).dropLast())
        }
        return defaults
    }

    /// `--lease` → `1s–1d`: the range each option's help states (its first `A–B` whose ends are
    /// both values).
    static func helpRanges() throws -> [String: (String, String)] {
        var ranges: [String: (String, String)] = [:]
        for (option, text) in try helpEntries() where ranges[option] == nil {
            if let range = Self.ranges(in: text).first { ranges[option] = range }
        }
        return ranges
    }

    /// Every `A–B` in `text` whose ends start with a digit, as written (a sentence's full stop
    /// left out).
    static func ranges(in text: String) -> [(String, String)] {
        text.matches(of: #/(\d(?:[\w.]*\w)?)–(\d(?:[\w.]*\w)?)/#).map { (String($0.output.1), String($0.output.2)) }
    }

    /// A value in any of the units options take, for comparison (nil: not a plain value).
    static func normalized(_ text: String) -> Double? {
        let t = text.replacingOccurrences(of: #"\s*\(.*\)$"#, with: "", options: .regularExpression)
        if let n = Double(t) { return n }
        if let s = TimeSpan.parse(t), t.last?.isLetter == true, "smhd".contains(t.last!) { return s }
        if let p = PixelCount.parse(t), t.lowercased().hasSuffix("mp") { return Double(p) }
        if let b = ByteSize.parse(t), t.lowercased().hasSuffix("ib") || t.lowercased().hasSuffix("b") { return Double(b) }
        return nil
    }

    @Test func theOperatingTablesDefaultsAreTheWorkersOwn() throws {
        let defaults = try Self.helpDefaults()
        #expect(defaults["--lease"] == "30s", "the help parser works: \(defaults)")
        let page = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/operating.md"), encoding: .utf8)
        var compared = 0
        for line in page.split(separator: "\n") where line.hasPrefix("| `--") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 2 else { continue }
            let option = String(cells[0].dropFirst().prefix { $0 != " " && $0 != "`" })
            guard let documented = Self.normalized(cells[1]), let help = defaults[option] else { continue }
            #expect(Self.normalized(help) == documented, "docs/operating.md says \(option) defaults to \(cells[1]); its help says \(help)")
            compared += 1
        }
        #expect(compared >= 20, "only \(compared) defaults compared: did the table's format change?")
    }

    /// A range the table states for an option is the one its help states and its check applies,
    /// and can be typed as it is written (`64MiB–1PiB` was printed, documented and refused).
    @Test func theOperatingTablesRangesAreTheWorkersOwn() throws {
        let ranges = try Self.helpRanges()
        #expect(ranges["--lease"].map { "\($0.0)–\($0.1)" } == "1s–1d", "the help parser works: \(ranges)")
        let page = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/operating.md"), encoding: .utf8)
        var compared = 0
        for line in page.split(separator: "\n") where line.hasPrefix("| `--") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 3 else { continue }
            let options = cells[0].matches(of: #/`(--[a-z-]+)/#).map { String($0.output.1) }
            for (low, high) in Self.ranges(in: cells[2]) {
                #expect(
                    Self.normalized(low) != nil && Self.normalized(high) != nil,
                    "docs/operating.md gives \(options.joined(separator: ", ")) the range \(low)–\(high), which cannot be typed as written")
                for option in options {
                    guard let help = ranges[option] else {
                        Issue.record("docs/operating.md gives \(option) a range, \(low)–\(high); its help states none")
                        continue
                    }
                    #expect(
                        Self.normalized(low) == Self.normalized(help.0) && Self.normalized(high) == Self.normalized(help.1),
                        "docs/operating.md says \(option) takes \(low)–\(high); its help says \(help.0)–\(help.1)")
                    compared += 1
                }
            }
        }
        #expect(compared >= 6, "only \(compared) ranges compared: did the table's format change?")
    }
}
