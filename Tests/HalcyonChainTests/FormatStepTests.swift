import HalcyonChain
import HalcyonDomain
import Testing

/// `format(…)` in the grammar — `quality=auto`, `format(auto)`, `max_bytes`, `compression` —
/// and the other output steps' arguments (`trim`, `pad`, `border`, `round_corner`): exact
/// identifiers, and refusals that say what was expected.
@Suite struct FormatStepTests {
    @Test func perceptualStepsHaveExactIdentifiers() throws {
        func id(_ text: String) throws -> String { try Chain.parse(text).identifier }
        #expect(try id("format(jpeg, quality=auto)") == "format(jpeg,quality=auto,min_score=80,progressive=false)")
        #expect(try id("format(webp, quality=auto, min_score=72.5)") == "format(webp,quality=auto,min_score=72.5)")
        #expect(try id("format(auto)") == "format(auto,min_score=80,formats=jpeg|webp|avif,progressive=false)")
        // Any order in, one order out: the cache key does not depend on how the list was written.
        #expect(try id("format(auto, formats=avif|webp|jpeg, min_score=90)") == "format(auto,min_score=90,formats=jpeg|webp|avif,progressive=false)")
        #expect(
            try id("format(avif, quality=auto, min_score=70, max_bytes=20000)")
                == "format(avif,quality=auto,min_score=70,max_bytes=20000,min_quality=10)")
        #expect(try id("format(jpeg, quality=auto, min_quality=40)") == "format(jpeg,quality=auto,min_score=80,progressive=false,min_quality=40)")
        // A fixed quality keeps the identifier it always had.
        #expect(try id("format(jpeg, quality=82)") == "format(jpeg,quality=82,progressive=false)")
        // Every identifier parses back to itself.
        for text in ["format(auto, formats=webp|avif, min_score=88)", "format(jpeg, quality=auto, min_score=30)", "format(webp, quality=auto)"] {
            let first = try id(text)
            #expect(try id(first) == first)
        }
        let step = try #require(try Chain.parse("format(auto, formats=webp)").formatStep)
        #expect(step.format == nil && step.formats == [.webp] && step.minScore == 80)
        #expect(try Chain.parse("resize(10x10) |> format(auto)").outputFormat == nil)
    }

    /// JPEG XL: `effort` and `lossless` in the identifier (effort always: it changes the bytes).
    @Test func jpegXLStepsHaveExactIdentifiers() throws {
        func id(_ text: String) throws -> String { try Chain.parse(text).identifier }
        #expect(try id("format(jxl)") == "format(jxl,quality=85,effort=7)")
        #expect(try id("format(jxl, quality=70, effort=3)") == "format(jxl,quality=70,effort=3)")
        #expect(try id("format(jxl, lossless=true)") == "format(jxl,lossless=true,effort=7)")
        #expect(try id("format(jxl, lossless=true, keep_metadata=true)") == "format(jxl,lossless=true,keep_metadata=true,effort=7)")
        #expect(try id("format(jxl, lossless=true, keep_metadata=false)") == "format(jxl,lossless=true,effort=7)")
        #expect(try id("format(jxl, lossless=false, quality=90)") == "format(jxl,quality=90,effort=7)")
        #expect(try id("format(jxl, quality=auto, min_score=85, effort=9)") == "format(jxl,quality=auto,min_score=85,effort=9)")
        #expect(
            try id("format(auto, formats=jxl|jpeg, effort=5)") == "format(auto,min_score=80,formats=jpeg|jxl,effort=5,progressive=false)")
        for text in ["format(jxl, lossless=true, effort=1)", "format(auto, formats=jpeg|jxl)", "format(jxl, quality=auto, max_bytes=9000)"] {
            let first = try id(text)
            #expect(try id(first) == first)
        }
        let step = try #require(try Chain.parse("format(jxl, lossless=true)").formatStep)
        #expect(step.lossless && step.quality == 100 && step.minScore == nil)
    }

    @Test(arguments: [
        ("format(png, quality=auto)", "quality=auto only with jpeg, webp, avif or jxl"),
        ("format(jpeg, quality=auto, min_score=29)", "'min_score' from 30 to 95"),
        ("format(jpeg, quality=auto, min_score=96)", "'min_score' from 30 to 95"),
        ("format(jpeg, quality=80, min_score=80)", "min_score only with quality=auto or format(auto)"),
        ("format(jpeg, formats=jpeg|webp)", "formats only with format(auto)"),
        ("format(auto, formats=png)", "jpeg, webp, avif, jxl in 'formats'"),
        ("format(auto, formats=jpeg|jpeg)", "each of 'formats' once"),
        ("format(auto, quality=80)", "quality=auto or none with format(auto)"),
        ("format(auto, compression=9)", "compression only with png"),
        ("format(gif, quality=auto)", "quality=auto only with jpeg, webp, avif or jxl"),
        ("resize(10x10, mode=fill|fit)", "for 'mode'"),
        ("format(jpeg, effort=5)", "effort only with jxl"),
        ("format(auto, effort=5)", "effort only with jxl"),
        ("format(jxl, effort=10)", "'effort' from 1 to 9"),
        ("format(webp, lossless=true)", "lossless only with jxl"),
        ("format(jxl, lossless=true, quality=90)", "lossless=true alone"),
        ("format(jxl, lossless=true, quality=auto)", "lossless=true alone"),
        ("format(jxl, lossless=true, max_bytes=5000)", "lossless=true alone"),
        ("format(jxl, keep_metadata=true)", "keep_metadata only with jxl and lossless=true"),
        ("format(jpeg, keep_metadata=true)", "keep_metadata only with jxl and lossless=true"),
    ])
    func badPerceptualStepsAreRefused(chain: String, expected: String) {
        do {
            _ = try Chain.parse(chain)
            Issue.record("\(chain) parsed")
        } catch {
            #expect(error.code == .invalidChain && error.message.contains(expected), "\(chain): \(error.message)")
        }
    }

    @Test(arguments: [
        ("format(png, max_bytes=5000)", "max_bytes only with a format that has a quality"),
        ("format(jpeg, min_quality=20)", "min_quality only with max_bytes"),
        ("format(jpeg, quality=50, max_bytes=5000, min_quality=60)", "from 1 to 50"),
        ("format(jpeg, max_bytes=10)", "from 100"),
        ("round_corner(120%)", "0% to 100%"),
        ("pad(10x10, gravity=entropy)", "center|north"),
        ("border(0)", "from 1"),
        ("trim(fuzz=2)", "from 0 to 1"),
        ("format(jpeg, compression=9)", "compression only with png"),
        ("format(png, compression=10)", "from 0 to 9"),
    ])
    func badOutputArgumentsAreChainErrors(chain: String, expected: String) {
        #expect(Fixture.chainError(chain)?.contains(expected) == true, "\(Fixture.chainError(chain) ?? "no error")")
    }

    @Test func identifiersNameTheLimitOnlyWhenSet() throws {
        #expect(try Chain.parse("format(jpeg)").identifier == "format(jpeg,quality=85,progressive=false)")
        #expect(
            try Chain.parse("format(webp, max_bytes=50000)").identifier == "format(webp,quality=85,max_bytes=50000,min_quality=10)")
        // The floor's default is never above the quality, so the identifier parses (scripts/fuzz chain).
        let low = try Chain.parse("format(jpeg, quality=5, max_bytes=500)").identifier
        #expect(low == "format(jpeg,quality=5,progressive=false,max_bytes=500,min_quality=5)")
        #expect(try Chain.parse(low).identifier == low)
        #expect(try Chain.parse("format(png)").identifier == "format(png,progressive=false)")
        #expect(try Chain.parse("format(png, compression=6)").identifier == "format(png,progressive=false)")
        #expect(try Chain.parse("format(png, compression=9)").identifier == "format(png,progressive=false,compression=9)")
        #expect(try Chain.parse("trim").identifier == "trim(fuzz=0)")
        #expect(try Chain.parse("border(3)").identifier == "border(3,color=#000000ff)")
    }
}
