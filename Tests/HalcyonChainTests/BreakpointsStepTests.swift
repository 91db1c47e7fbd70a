import HalcyonChain
import HalcyonDomain
import Testing

/// `breakpoints(…)`: its defaults and canonical identifier, what it refuses (each naming the
/// step's column), its place at the end of a chain without `format`, and each rung's own chain.
@Suite struct BreakpointsStepTests {
    @Test func defaultsAndTheCanonicalIdentifier() throws {
        let chain = try Chain.parse("resize(2000x2000) |> BREAKPOINTS")
        let step = try #require(chain.breakpoints)
        #expect(step.identifier == "breakpoints(min_width=320,max_width=1600,bytes_step=20000,max_images=8,formats=avif|webp|jpeg,min_score=80)")
        #expect(chain.outputFormat == .jpeg, "the fallback's: the last format")
        // Any spelling of the same set is the same key.
        let spelled = try Chain.parse("resize(2000x2000) >> breakpoints(min_score=80.0, formats=avif|webp|jpeg, max_images=8)")
        #expect(spelled.identifier == chain.identifier)
        let other = try #require(
            try Chain.parse("breakpoints(min_width=100, max_width=640, bytes_step=5000, max_images=3, formats=webp|jpeg, min_score=70)").breakpoints)
        #expect(other.identifier == "breakpoints(min_width=100,max_width=640,bytes_step=5000,max_images=3,formats=webp|jpeg,min_score=70)")
        #expect(other.fallback == .jpeg && other.formats == [.webp, .jpeg])
        #expect(try Chain.parse(other.identifier).identifier == other.identifier, "the identifier parses to itself")
        #expect(other.outputSize(from: ImageSize(width: 4000, height: 3000)) == ImageSize(width: 640, height: 480))
        #expect(other.outputSize(from: ImageSize(width: 300, height: 200)) == ImageSize(width: 300, height: 200), "never upscaled")
        // The formats as written: the <picture>'s order, the fallback last.
        let ordered = try #require(try Chain.parse("breakpoints(formats=jpeg|avif|webp)").breakpoints)
        #expect(ordered.formats == [.jpeg, .avif, .webp] && ordered.fallback == .webp && ordered.identifier.contains("formats=jpeg|avif|webp"))
        // min_width alone above the default max: max_width follows it.
        #expect(try Chain.parse("breakpoints(min_width=2000)").breakpoints?.maxWidth == 2000)
    }

    @Test(
        arguments: [
            ("breakpoints |> flip", "at column 1: expected breakpoints as the chain's last step, found 'flip' after breakpoints"),
            ("flip |> breakpoints |> format(png)", "at column 9: expected breakpoints as the chain's last step, found 'format' after breakpoints"),
            (
                "format(webp) |> breakpoints",
                "at column 17: expected breakpoints alone: it encodes every rung in its own formats, at quality=auto for its min_score, found a format step with breakpoints"
            ),
            ("breakpoints(min_width=900, max_width=600)", "at column 1: expected min_width ≤ max_width, found min_width=900 above max_width=600"),
            ("breakpoints(formats=webp|webp)", "at column 21: expected each of 'formats' once, found 'webp|webp'"),
            ("breakpoints(max_images=21)", nil), ("breakpoints(max_images=0)", nil), ("breakpoints(bytes_step=10)", nil),
            ("breakpoints(max_width=9000)", nil), ("breakpoints(min_score=99)", nil), ("breakpoints(formats=png|jpeg)", nil),
            ("breakpoints(sizes=100vw)", nil),
        ] as [(String, String?)])
    func refusals(chain: String, message: String?) throws {
        let refusal = Fixture.chainError(chain, presets: [:])
        if let message { #expect(refusal == message) } else { #expect(refusal != nil, "\(chain) parsed") }
    }

    /// Each rung's own chain adds two steps to those before the set: they must fit the limit.
    @Test func theStepsBeforeASetLeaveRoomForARungsChain() throws {
        let flips = { (n: Int) in Array(repeating: "flip", count: n).joined(separator: " |> ") }
        #expect(Fixture.chainError(flips(62) + " |> breakpoints", presets: [:]) == nil)
        let refused = Fixture.chainError(flips(63) + " |> breakpoints", presets: [:])
        #expect(refused?.contains("expected at most 62 steps before breakpoints") == true, "\(refused ?? "accepted")")
        let chain = try Chain.parse(flips(62) + " |> breakpoints")
        let step = try #require(chain.breakpoints)
        #expect(try BreakpointsStep.rungChain(before: chain.stepsBeforeBreakpoints, width: 320, format: .webp, of: step).steps.count == 64)
    }

    @Test func aPresetMayEndInBreakpoints() throws {
        let presets = ["hero": "crop(1600x900) |> breakpoints(formats=webp|jpeg)"]
        let chain = try Chain.parse("preset(hero)", presets: presets)
        #expect(chain.breakpoints?.formats == [.webp, .jpeg] && chain.stepsBeforeBreakpoints.count == 1)
        #expect(
            Fixture.chainError("preset(hero) |> flip", presets: presets)?.hasPrefix("at column 1: expected breakpoints as the chain's last step")
                == true)
    }

    @Test func eachRungHasTheChainThatMakesItAlone() throws {
        let chain = try Chain.parse("crop(1600x900) |> breakpoints(min_score=75)")
        let step = try #require(chain.breakpoints)
        let rung = try BreakpointsStep.rungChain(before: chain.stepsBeforeBreakpoints, width: 640, format: .avif, of: step)
        #expect(rung.identifier == "crop(1600x900,x=0.5,y=0.5)|>resize(640x16384,mode=fit)|>format(avif,quality=auto,min_score=75)")
        #expect(rung.identifier == (try Chain.parse("crop(1600x900) |> resize(640x16384) |> format(avif, quality=auto, min_score=75)")).identifier)
        let bare = try BreakpointsStep.rungChain(before: [], width: 320, format: .jpeg, of: step)
        #expect(bare.identifier == "resize(320x16384,mode=fit)|>format(jpeg,quality=auto,min_score=75,progressive=false)")
    }
}
