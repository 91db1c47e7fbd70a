import Foundation
import HalcyonDomain
import HalcyonImage
import HalcyonRuntime

/// For `halcyon bench`'s E set: what #18's front-end steps cost, in-process, one thread, on the
/// corpus's 1920×1080 JPEGs — a fill with the centre against `entropy` and `attention` (both
/// through ImageMagick, where pixel-judged gravities run), and W1's chain without and with
/// every placeholder, and with the source's perceptual hash. CPU milliseconds per image (thread
/// CPU time, decode to encode).
public enum FrontEndBench {
    public struct Row: Sendable {
        public var what: String
        public var cpuMs: Double
    }

    static let fill = "resize(320x320, mode=fill) |> format(jpeg, quality=82)"
    static let cases: [(what: String, chain: String, direct: Bool, placeholders: Bool, hash: Bool)] = [
        ("fill, centre (ImageMagick lane)", fill, false, false, false),
        ("fill, gravity=entropy", "resize(320x320, mode=fill, gravity=entropy) |> format(jpeg, quality=82)", false, false, false),
        ("fill, gravity=attention", "resize(320x320, mode=fill, gravity=attention) |> format(jpeg, quality=82)", false, false, false),
        ("W1 chain", fill, true, false, false),
        ("W1 chain + blurhash, thumbhash, dominant_color", fill, true, true, false),
        ("W1 chain + perceptual_hash (PDQ)", fill, true, false, true),
    ]

    /// Blocking: call from a Dispatch thread.
    public static func measure(_ sources: [Data]) throws(HalcyonError) -> [Row] {
        let all = PlaceholderRequest(kinds: Set(PlaceholderKind.allCases))
        return try cases.map { c throws(HalcyonError) -> Row in
            let chain = try ProcessorChain.parse(c.chain)
            var clock = StageClock()
            for data in sources {
                _ = try ImagePipeline.run(
                    data, format: .jpeg, chains: [chain], directLane: c.direct, placeholders: c.placeholders ? [all] : [],
                    hashes: c.hash ? [.source] : []
                )[0].get()
            }
            return Row(what: c.what, cpuMs: clock.lap().cpu * 1000 / Double(max(1, sources.count)))
        }
    }
}
