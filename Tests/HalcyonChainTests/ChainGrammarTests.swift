import HalcyonChain
import HalcyonDomain
import HalcyonRuntime
import HalcyonTestSupport
import Testing

@Suite(.cpuHeavy) struct ChainGrammarTests {
    func identifier(_ chain: String) throws -> String { try Chain.parse(chain).identifier }

    @Test func emptyChainHasEmptyIdentifier() throws {
        #expect(try identifier("") == "")
        #expect(try identifier("   ") == "")
        #expect(try Chain.parse("").resultKey(cacheKey: "k") == "k")
    }

    @Test func canonicalIdentifierMakesEveryParameterExplicit() throws {
        #expect(try identifier("resize(320x320)") == "resize(320x320,mode=fit)")
        #expect(try identifier("format(jpeg)") == "format(jpeg,quality=85,progressive=false)")
        #expect(try identifier("format(png, quality=10)") == "format(png,progressive=false)")
    }

    @Test(arguments: [
        ("resize(320x320, mode=fill) |> format(jpeg, quality=82)", "resize(320x320,mode=fill)|>format(jpeg,quality=82,progressive=false)"),
        ("RESIZE( 320x320 ,MODE = FILL )>>format(jpeg,quality=82.0)", "resize(320x320,mode=fill)|>format(jpeg,quality=82,progressive=false)"),
        (
            "resize(size=320x320, mode=fill) |> format(format=jpeg, quality=82)",
            "resize(320x320,mode=fill)|>format(jpeg,quality=82,progressive=false)"
        ),
        ("resize(mode=fill, size=320x320)|>format(quality=82,format=jpeg)", "resize(320x320,mode=fill)|>format(jpeg,quality=82,progressive=false)"),
    ])
    func equivalentSpellingsShareAnIdentifier(chain: String, expected: String) throws {
        #expect(try identifier(chain) == expected)
        #expect(try Chain.parse(chain).resultKey(cacheKey: "src") == "src@" + expected)
    }

    /// A number is read at the precision its identifier keeps (4 decimals), so that two chains
    /// sharing an identifier — and a cache key — do the same thing (found by `scripts/fuzz chain`).
    @Test func numbersAreReadAtTheIdentifiersPrecision() throws {
        let tiny = try #require(Chain.parse("rotate(0.00001)").steps.first as? RotateStep)
        #expect(tiny.degrees == 0 && tiny.identifier == "rotate(0)")
        let almostFull = try #require(Chain.parse("rotate(-0.00001)").steps.first as? RotateStep)
        #expect(almostFull.identifier == "rotate(0)")
        let chain = try Chain.parse(#"watermark("https://a.example/m.png", opacity=0.40965)"#)
        let mark = try #require(chain.steps.first as? WatermarkStep)
        #expect(mark.opacity == 0.4097 && mark.identifier.contains("opacity=0.4097"))
        #expect(try identifier("crop(10x10, x=0.12345, y=0.5)") == identifier("crop(10x10, x=0.1235, y=0.5)"))
    }

    @Test func differentChainsDiffer() throws {
        let ids = try ["resize(320x320)", "resize(320x320, mode=fill)", "resize(320x321)", "format(jpeg, quality=80)", "format(webp, quality=80)"]
            .map(identifier)
        #expect(Set(ids).count == ids.count)
    }

    @Test(arguments: [
        ("resize(320x320", 15, "','"),  // unclosed
        ("resize(320x320) |> ", 20, "a step name"),  // dangling pipe
        ("resize(320x320) format(png)", 17, "'|>'"),  // missing pipe
        ("blurry(3)", 1, "one of"),  // unknown step
        ("resize(320x320, mode=fil)", 22, "fit|fill|stretch"),
        ("resize(0x10)", 8, "a size from 1x1"),
        ("resize(100000x100000)", 8, "a size from 1x1"),
        ("resize(320)", 8, "a size WxH"),
        ("format(jpeg, quality=0)", 22, "from 1 to 100"),
        ("format(jpeg, quality=NaN)", 22, "a number"),
        ("format(gifv)", 8, "jpeg|png|webp"),
        ("resize(320x320, colour=red)", 17, "one of gravity, mode, size"),
        ("resize(320x320, 1x1)", 17, "fit|fill|stretch"),
        ("resize(320x320) |> ✨", 20, "a step"),
        ("format(jpeg, quality=90, quality=91)", 26, "each argument once"),
    ])
    func errorsNameThePositionAndWhatWasExpected(chain: String, column: Int, expected: String) {
        #expect {
            _ = try Chain.parse(chain)
        } throws: { error in
            guard let e = error as? HalcyonError, e.code == .invalidChain else { return false }
            return e.message.contains("at column \(column):") && e.message.contains(expected)
        }
    }

    @Test func hostileChainsAreRejectedCheaply() {
        let long = Array(repeating: "format(png)", count: 10_000).joined(separator: " |> ")
        // This thread's CPU time, which a loaded machine does not stretch (the parse runs here).
        let cpu = StageClock.threadCPUSeconds()
        #expect(throws: HalcyonError.self) { _ = try Chain.parse(long) }
        let used = StageClock.threadCPUSeconds() - cpu
        #expect(used < 2, "\(used) s of CPU to refuse a chain of 10,000 steps")
    }
}

/// Chains that fail.
enum Fixture {
    /// The message of the `job.invalid_chain` that `chain` fails with (its presets from
    /// `presets`); nil when it parses.
    static func chainError(_ chain: String, presets: [String: String] = [:]) -> String? {
        do {
            _ = try Chain.parse(chain, presets: presets)
            return nil
        } catch {
            return error.code == .invalidChain ? error.message : "not job.invalid_chain: \(error)"
        }
    }
}
