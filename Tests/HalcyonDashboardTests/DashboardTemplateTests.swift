import Foundation
import Testing

@testable import HalcyonDashboard

/// The pages' templates: the copy compiled into the binary (`Templates.swift`, written by
/// `scripts/dashboard-templates`) is the `.mustache` files', each parses, and none inserts a
/// value unescaped but the layout's page body.
@Suite struct DashboardTemplateTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/HalcyonDashboard/Templates")

    func files() throws -> [String: String] {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.directory.path).filter { $0.hasSuffix(".mustache") }
        var files: [String: String] = [:]
        for name in names {
            var text = try String(contentsOf: Self.directory.appendingPathComponent(name), encoding: .utf8)
            if text.hasSuffix("\n") { text.removeLast() }
            files[String(name.dropLast(".mustache".count))] = text
        }
        return files
    }

    @Test func theCompiledTemplatesAreTheFiles() throws {
        let files = try files()
        #expect(!files.isEmpty)
        #expect(Set(files.keys) == Set(Templates.sources.keys), "run scripts/dashboard-templates")
        for (name, text) in files {
            #expect(Templates.sources[name] == text, "\(name).mustache changed: run scripts/dashboard-templates")
        }
    }

    @Test func everyTemplateParses() {
        #expect(Views.parseErrors().isEmpty, "\(Views.parseErrors())")
    }

    /// `{{ }}` escapes; `{{{ }}}` and `{{& }}` do not, so job data must never pass through them.
    @Test func onlyThePageBodyIsInsertedUnescaped() throws {
        for (name, text) in try files() {
            let unescaped = text.components(separatedBy: "{{{").count - 1 + text.components(separatedBy: "{{&").count - 1
            #expect(unescaped == (name == "layout" ? 1 : 0), "\(name).mustache")
        }
        #expect(try files()["layout"]?.contains("<main id=\"main\">{{{main}}}</main>") == true)
    }

    /// A value holding markup comes out as text in every kind of row.
    @Test func rowsEscapeTheirValues() {
        let markup = "<script>alert('x')</script>&\""
        let html =
            Views.render(
                "row", Row.links("tags", [Row.Link(href: "/jobs?tag=\(markup)", text: markup)]))
            + Views.render("row", Row.text("source", markup)) + Views.render("row", Row.pre("options", markup))
            + Views.render("row", Row.lines("fallback sources", [markup, markup])) + Views.render("clipped", Clipped(markup + markup, 5))
        #expect(!html.contains("<script>") && !html.contains("'x'"), "\(html)")
        #expect(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"))
    }
}
