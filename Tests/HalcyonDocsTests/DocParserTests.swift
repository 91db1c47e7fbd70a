import Testing

/// The doc test's own logic: which blocks run, and how their output is compared.
struct DocParserTests {
    @Test func runnableBlocksTheirOutputAndDirectives() throws {
        let text = """
            <!-- doctest: unmigrated -->
            # Page

            ```sh
            not run
            ```

            ```sh runnable
            halcyon migrate
            ```

            ```text output
            applied …
            ```

              ```sql runnable exit=3
              SELECT 1;
              ```
            """
        let page = try DocParser.page(text, path: "p.md")
        #expect(page.directives == [.unmigrated])
        #expect(page.examples.count == 2)
        #expect(page.examples[0].code == "halcyon migrate")
        #expect(page.examples[0].expectedOutput == "applied …")
        #expect(page.examples[0].line == 8)
        #expect(page.examples[1].language == .sql)
        #expect(page.examples[1].expectedExit == 3)
        #expect(page.examples[1].code == "SELECT 1;")
        #expect(page.examples[1].expectedOutput == nil)
    }

    @Test func malformedMarkersAreErrors() {
        #expect(throws: DocFormatError.self) { try DocParser.page("```ruby runnable\nx\n```\n", path: "p.md") }
        #expect(throws: DocFormatError.self) { try DocParser.page("```sh runnable exits=1\nx\n```\n", path: "p.md") }
        #expect(throws: DocFormatError.self) { try DocParser.page("```text output\nx\n```\n", path: "p.md") }
        #expect(throws: DocFormatError.self) { try DocParser.page("<!-- doctest: embeded -->\n", path: "p.md") }
    }

    @Test func severalDirectives() throws {
        let page = try DocParser.page("<!-- doctest: embedded -->\n<!-- doctest: after-demo -->\n", path: "p.md")
        #expect(page.directives == [.embedded, .afterDemo])
    }

    @Test func anOutputBlockAfterProseIsNotTheExamplesOutput() throws {
        let text = "```sh runnable\ntrue\n```\nSome prose.\n```text output\nx\n```\n"
        #expect(throws: DocFormatError.self) { try DocParser.page(text, path: "p.md") }
    }

    @Test func outputMatching() {
        #expect(OutputPattern.matches(expected: "id  state\n 1  queued", actual: "id state\n1 queued\n\n"))
        #expect(!OutputPattern.matches(expected: "1 queued", actual: "1 running"))
        #expect(!OutputPattern.matches(expected: "1 queued", actual: "1 queued\nextra"), "the whole output must match")
        #expect(OutputPattern.matches(expected: "job …: succeeded in … s", actual: "job 17: succeeded in 0.4 s"))
        #expect(!OutputPattern.matches(expected: "job …: succeeded", actual: "job 17: failed"))
        #expect(OutputPattern.matches(expected: "first\n…\nlast", actual: "first\nlast"))
        #expect(OutputPattern.matches(expected: "first\n…\nlast", actual: "first\na\nb\nlast"))
        #expect(!OutputPattern.matches(expected: "first\n…\nlast", actual: "first\na\nb"))
        #expect(!OutputPattern.line("a…a", matches: "a"))
        #expect(OutputPattern.matches(expected: "ok", actual: "\u{1B}[1mok\u{1B}[0m"))
    }
}
