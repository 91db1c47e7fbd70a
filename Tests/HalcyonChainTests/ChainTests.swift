import HalcyonChain
import HalcyonDomain
import Testing

/// `Chain.parse` with presets: a `preset(NAME)` step is replaced by the preset's steps (the
/// identifier, and so the result key, is the expanded chain's); what it refuses, each at the
/// `preset(…)` step's column; and the limits, counted once presets are expanded.
@Suite struct ChainTests {
    static let presets = [
        "thumb": "resize(320x320, mode=fill) |> format(webp, quality=80)",
        "broken": "resize(320x",
        "nested": "preset(thumb)",
        "bad": "resize(320x320) |> blurry(3)",
        "long": Array(repeating: "flip", count: 60).joined(separator: " |> "),
        "marks": (1...3).map { #"watermark("https://cdn.test/\#($0).png")"# }.joined(separator: " |> "),
    ]

    static func refusal(_ text: String) -> String? { Fixture.chainError(text, presets: presets) }

    @Test func aPresetIsExpandedInPlace() throws {
        let chain = try Chain.parse("preset(thumb) |> format(jpeg)", presets: Self.presets)
        #expect(chain.identifier == "resize(320x320,mode=fill)|>format(webp,quality=80)|>format(jpeg,quality=85,progressive=false)")
        #expect(chain.resultKey(cacheKey: "k") == "k@" + chain.identifier)
        #expect(chain.outputFormat == .jpeg && chain.steps.count == 3)
        // Either spelling, any case: the expanded chain is the preset's own.
        let plain = try Chain.parse(try #require(Self.presets["thumb"]))
        #expect(try Chain.parse("PRESET(name=THUMB)", presets: Self.presets).identifier == plain.identifier)
        let marks = try Chain.parse("preset(marks) |> " + #"watermark("https://cdn.test/1.png", scale=0.5)"#, presets: Self.presets)
        #expect(marks.watermarkSources == (1...3).map { "https://cdn.test/\($0).png" })
    }

    @Test(arguments: [
        ("preset(nope)", "at column 1: expected a preset (halcyon preset list), found unknown preset 'nope'"),
        ("preset", "at column 1: expected preset(NAME), found 'preset' without a name"),
        ("flip |> preset(name=nested)", "at column 9: expected presets of plain steps, found preset 'nested' naming another preset"),
        (
            "preset(broken) |> preset(thumb)",
            "at column 1: expected a preset whose chain parses, found preset 'broken': at column 8: expected a size WxH such as 320x240, found '320x'"
        ),
        (
            "flip |> preset(bad)",
            "at column 9: expected a preset whose chain parses, found preset 'bad': at column 20: expected one of auto_orient, black_white, blend, blur, border, breakpoints, color_controls, crop, downsample, extend, flip, flop, format, overlay, pad, preset, resize, rotate, round_corner, sharpen, strip, tint, trim, watermark, found unknown step 'blurry'"
        ),
        ("preset(long) |> flip |> flip |> flip |> flip |> flip", "at column 49: expected at most 64 steps, presets expanded, found step 65"),
        (
            #"preset(marks) |> watermark("https://cdn.test/1.png") |> watermark("https://cdn.test/4.png") |> watermark("https://cdn.test/5.png")"#,
            "at column 96: expected at most 4 distinct watermark sources in a chain (one may be drawn many times), found a 5th distinct watermark"
        ),
    ])
    func presetRefusalsNameTheStepsColumn(chain: String, message: String) {
        #expect(Self.refusal(chain) == message)
    }

    @Test func theLimitsCountTheExpandedSteps() throws {
        #expect(try Chain.parse("preset(long) |> flip |> flip |> flip |> flip", presets: Self.presets).steps.count == 64)
        #expect(Self.refusal(Array(repeating: "flip", count: 65).joined(separator: " |> "))?.hasSuffix("found step 65") == true)
    }

    @Test func presetNamesAreListedInOrder() {
        #expect(Chain.presetNames(inOrder: "PRESET(Thumb) |> flip |> preset(name=card)") == ["thumb", "card"])
        #expect(Chain.presetNames(inOrder: "preset(thumb").isEmpty)
        #expect(Chain.presetNames(inOrder: "resize(10x10) |> flip").isEmpty)
    }
}
