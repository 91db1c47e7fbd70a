import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonTestSupport
import Testing

/// Property-based fuzzing of the chain grammar: random mutations of valid chains and random
/// token soup. Whatever the input, `Chain.parse` returns a chain or throws
/// `job.invalid_chain` — never another error, never a crash — and a chain it accepts has a
/// canonical identifier that parses back to itself. HALCYON_FUZZ_ITERATIONS runs longer
/// (CI: 20,000); HALCYON_FUZZ_SEED replays a run.
@Suite(.cpuHeavy) struct ChainFuzzTests {
    static let seeds = [
        "resize(320x320, mode=fill) |> format(jpeg, quality=82)",
        "resize(1024x1024, mode=fit) |> format(webp, quality=80)",
        "crop(100x100, x=10, y=20) |> blur(2) |> sharpen(1.5) |> rotate(90) |> format(png)",
        "round_corners(12) |> blend(multiply, alpha=0.5, background=#ff000080) |> format(png)",
        "colorize(red, 0.3) |> color_controls(brightness=1.1, contrast=0.9, saturation=0) |> flip |> flop",
        "resize(800x800, mode=fit) |> format(jpeg, quality=auto, min_score=84, max_bytes=30000)",
        "format(auto, min_score=90, formats=avif|webp|jpeg, min_quality=30)",
        "crop(1600x900) |> breakpoints(min_width=200, max_width=1200, bytes_step=15000, max_images=6, formats=avif|webp|jpeg, min_score=75)",
    ]
    static let alphabet: [String] = [
        "(", ")", ",", "|>", "|", ">", "=", "x", "0", "1", "-1", "1e308", "NaN", "inf", "-0",
        "99999999999999999999", " ", "\t", "\n", "#", "ff", "mode", "fill", "fit", "quality",
        "resize", "format", "jpeg", "auto", "webp|avif", "min_score", "formats", "breakpoints", "max_images", "✨", "\u{0}", "\u{202E}", "é", "\"",
        "'", "\\", "%s", "${x}",
    ]

    @Test func parseNeverFailsOtherThanAsInvalidChain() {
        var rng = FuzzRandom.fromEnvironment()
        let iterations = FuzzRandom.iterations(default: 20_000)
        var accepted = 0
        for i in 0..<iterations {
            let input =
                i % 4 == 3
                ? rng.soup(Self.alphabet, length: rng.below(40)) : rng.mutate(Self.seeds[rng.below(Self.seeds.count)], alphabet: Self.alphabet)
            do {
                let chain = try Chain.parse(input)
                accepted += 1
                let again = try Chain.parse(chain.identifier)
                #expect(again.identifier == chain.identifier, "seed \(rng.seed) input \(input.debugDescription)")
            } catch {
                guard error.code == .invalidChain else {
                    Issue.record("seed \(rng.seed) input \(input.debugDescription): \(error)")
                    return
                }
            }
        }
        #expect(accepted > 0, "no mutation kept a chain valid: the fuzzer is not reaching the parser's success paths")
    }
}
