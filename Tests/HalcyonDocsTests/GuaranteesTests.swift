import Foundation
import Testing

/// docs/guarantees.md names, for each promise, the tests that prove it: every test it names
/// exists, in the file it names.
struct GuaranteesTests {
    @Test func everyNamedTestExistsInItsFile() throws {
        let page = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/guarantees.md"), encoding: .utf8)
        let tests = repositoryRoot.appendingPathComponent("Tests")
        var files: [String: String] = [:]
        for case let url as URL in FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil)!
        where url.pathExtension == "swift" {
            // Two targets may have a file of the same name: either may hold the test.
            files[url.lastPathComponent, default: ""] += try String(contentsOf: url, encoding: .utf8)
        }
        var checked = 0
        for line in page.split(separator: "\n") where line.hasPrefix("|") {
            // "`File.swift` → `testA` (…), `testB`; `Other.swift` → `testC`"
            let groups = line.components(separatedBy: "`").enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
            var file: String?
            for token in groups {
                if token.hasSuffix(".swift") {
                    file = token
                    #expect(files[token] != nil, "docs/guarantees.md names \(token), which is not under Tests/")
                } else if let file, let text = files[file], token.first?.isLowercase == true, token.count >= 12,
                    token.allSatisfy({ $0.isLetter || $0.isNumber })
                {
                    #expect(text.contains("func \(token)("), "docs/guarantees.md names \(file) → \(token), which it does not define")
                    checked += 1
                }
            }
        }
        #expect(checked >= 60, "only \(checked) tests named: did the page's format change?")
    }
}
