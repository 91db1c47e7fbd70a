import Foundation
import HalcyonRuntime
import Testing

/// docs/operating.md's table of worker options says each one's default; the worker's own help
/// (docs/cli/work.md, checked against the binary) is where defaults come from. Every default the
/// table states as a value — a duration, a size, a number, a pixel count — is the help's.
struct ConfigurationTableTests {
    /// `--lease` → `30s`, from the help's "(default: …)".
    static func helpDefaults() throws -> [String: String] {
        let page = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/cli/work.md"), encoding: .utf8)
        var defaults: [String: String] = [:]
        var option: String?, text = ""
        func finish() {
            guard let option, let range = text.range(of: #"\(default: ([^)]*)\)"#, options: .regularExpression) else { return }
            defaults[option] = String(text[range].dropFirst("(default: ".count).dropLast())
        }
        for line in page.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("  --") {
                finish()
                option = line.dropFirst(2).split(separator: " ").first.map { String($0.split(separator: "/").first ?? $0) }
                text = String(line)
            } else {
                text += " " + line.trimmingCharacters(in: .whitespaces)
            }
        }
        finish()
        return defaults
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
}
