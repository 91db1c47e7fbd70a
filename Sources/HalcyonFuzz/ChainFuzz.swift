import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonImage

/// Fuzz target `chain`: a job's `processors` text through the grammar (HalcyonChain:
/// `ChainGrammar`, each step's argument checks and preset expansion in `Chain.parse`), its
/// identifier and result key, and then what the pipeline (HalcyonImage) does with a chain before
/// any pixel: its processors (`ProcessorChain`), the plan of every step's size from small and
/// huge sources (`ImageLimits.plan`), the shrink-on-load hint, the direct lane's choice.
///
/// Properties checked: the identifier is canonical — it parses, to the same identifier and to
/// the same steps (so two chains that share a cache key do the same thing) — and every chain
/// that parses has its processors.
public enum ChainFuzz {
    /// Presets a chain may name: plain, broken, naming another preset, and one that grows.
    static let presets = [
        "thumb": "resize(320x320, mode=fill) |> format(webp, quality=80)",
        "broken": "resize(320x",
        "nested": "preset(thumb)",
        "grow": "pad(16384x16384) |> rotate(45)",
    ]

    /// Sizes each parsed chain is planned from.
    static let sizes = [
        ImageSize(width: 1, height: 1), ImageSize(width: 640, height: 480), ImageSize(width: 16384, height: 16384),
        ImageSize(width: 16384, height: 1), ImageSize(width: 1, height: 16384),
    ]

    public static func run(_ data: Data) {
        // A text column: whatever the bytes, the worker sees a String.
        let text = String(decoding: data, as: UTF8.self)
        _ = try? ChainGrammar.parse(text)
        _ = Chain.presetNames(inOrder: text)
        let parsed: Chain
        do {
            parsed = try Chain.parse(text, presets: presets)
        } catch {
            precondition(error.code == .invalidChain, "chain '\(text)' failed with \(error.code), not job.invalid_chain")
            return
        }
        let identifier = parsed.identifier
        _ = parsed.resultKey(cacheKey: "key")
        _ = parsed.watermarkSources
        _ = parsed.outputFormat

        let again: Chain
        do {
            again = try Chain.parse(identifier)
        } catch {
            preconditionFailure("the identifier '\(identifier)' of '\(text)' does not parse: \(error)")
        }
        precondition(again.identifier == identifier, "'\(text)' is '\(identifier)', which is '\(again.identifier)'")
        for (a, b) in zip(parsed.steps, again.steps) where !(a is FormatStep) {
            // `format` keeps settings its format ignores (a png's quality) out of its identifier.
            precondition(settings(a) == settings(b), "'\(text)' is '\(identifier)', but \(a) became \(b) through its identifier")
        }

        let chain: ProcessorChain
        do {
            chain = try ProcessorChain(parsed)
        } catch {
            preconditionFailure("'\(text)' parses, but its processors do not: \(error)")
        }
        _ = DirectLane.accepts(chain)

        let limits = ImageLimits()
        for size in sizes {
            for frames in [1, 300] {
                _ = try? limits.plan(chain, from: size, frames: frames)
            }
            for swapsAxes in [false, true] {
                let header = MagickImage.Header(width: size.width, height: size.height, frames: 1, swapsAxes: swapsAxes)
                if let hint = ImagePipeline.shrinkHint([chain], header) {
                    precondition(hint.width >= 1 && hint.height >= 1, "'\(text)' hints \(hint) for \(size)")
                }
            }
        }
    }

    /// A step's stored settings as text (its reflection), -0 written as 0.
    static func settings(_ step: any ChainStepDefinition) -> String {
        String(describing: step).replacingOccurrences(of: "-0.0,", with: "0.0,").replacingOccurrences(of: "-0.0)", with: "0.0)")
    }
}
