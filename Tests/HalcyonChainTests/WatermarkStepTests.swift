import HalcyonChain
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// `watermark("SOURCE", …)` in the grammar: quoted strings, their bound, its arguments, and how
/// many distinct sources a chain may name.
@Suite(.cpuHeavy) struct WatermarkStepTests {
    @Test func quotedStringsParseAndPrintCanonically() throws {
        let chain = try Chain.parse(#"watermark("https://cdn.test/a \"b\" \\c.png", scale=0.25)"#)
        let mark = try #require(chain.steps.first as? WatermarkStep)
        #expect(mark.source == #"https://cdn.test/a "b" \c.png"#)
        #expect(chain.identifier == #"watermark("https://cdn.test/a \"b\" \\c.png",gravity=south_east,margin=16,scale=0.25,opacity=0.6)"#)
        #expect(try Chain.parse(chain.identifier).identifier == chain.identifier)
        #expect(chain.watermarkSources == [#"https://cdn.test/a "b" \c.png"#])
    }

    /// The longest string parses at once; a longer one is refused at its limit (the length is
    /// counted as the string is read, not re-walked per character).
    @Test func stringsAreBoundedCheaply() throws {
        let long = String(repeating: "a", count: 32768)
        let cpu = StageClock.threadCPUSeconds()
        #expect(try Chain.parse("watermark(\"data:\(long.dropFirst(5))\")").watermarkSources.first?.count == 32768)
        #expect(Fixture.chainError("watermark(\"\(long)b\")")?.contains("a string over 32768 characters") == true)
        // This thread's CPU time, which a loaded machine does not stretch: a re-walk per
        // character (half a billion steps) would take many seconds of it.
        let used = StageClock.threadCPUSeconds() - cpu
        #expect(used < 2, "\(used) s of CPU to parse two 32 KiB strings")
    }

    @Test(arguments: [
        (#"watermark("https://x/y.png)"#, "closing quote"),
        (#"watermark("a\nb")"#, #"\" or \\ in a string"#),
        ("watermark(https)", "double-quoted string"),
        (#"watermark("")"#, "double-quoted string"),
        ("watermark(scale=0.2)", "without a source"),
        (#"watermark("https://x/y.png", scale=2)"#, "from 0.01 to 1"),
        (#"watermark("https://x/y.png", gravity=attention)"#, "center|north"),
    ])
    func badWatermarksAreChainErrors(chain: String, expected: String) {
        #expect(Fixture.chainError(chain)?.contains(expected) == true, "\(Fixture.chainError(chain) ?? "no error")")
    }

    /// A chain names at most four distinct watermarks; one may be drawn any number of times.
    @Test func aChainNamesABoundedNumberOfWatermarks() throws {
        let five = (1...5).map { #"watermark("https://cdn.test/\#($0).png")"# }.joined(separator: " |> ")
        #expect(Fixture.chainError(five)?.contains("at most 4 distinct watermark sources") == true, "\(Fixture.chainError(five) ?? "")")
        let many = (1...13).map { #"watermark("https://cdn.test/\#($0 % 4).png", scale=0.1)"# }.joined(separator: " |> ")
        #expect(try Chain.parse(many).watermarkSources.count == 4)
    }
}
