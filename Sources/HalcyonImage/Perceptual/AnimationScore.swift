import Foundation
import HalcyonDomain

/// An animation's score: the worst SSIMULACRA2 of its frames, each encoded frame against the
/// same frame of the chain's pixels. Up to `sampledFrames` frames are scored, spread evenly from
/// the first to the last (all of them when there are no more), so that a long animation costs
/// a bounded number of references: one is prepared at a time (48 bytes a pixel), the first
/// frame's is the search's own.
struct AnimationScore {
    /// The most frames scored.
    static let sampledFrames = 8

    /// The chain's pixels, every frame coalesced (full canvas).
    let frames: MagickImage
    /// The first frame's prepared reference.
    let first: SSIMULACRA2Reference

    /// Frame indices scored of `count`: evenly spaced, the first and the last among them.
    static func sampled(_ count: Int, most: Int = sampledFrames) -> [Int] {
        guard count > most else { return Array(0..<max(count, 0)) }
        return (0..<most).map { $0 * (count - 1) / (most - 1) }
    }

    /// The worst score of the sampled frames of `data`, decoded as `format` (coalesced). A frame
    /// whose size is not its reference's (a step that left frames of several sizes) is skipped;
    /// the first frame always counts.
    func score(encoded data: Data, format: ImageFormat) throws(HalcyonError) -> Double {
        let decoded = try MagickImage.decode(data, format: format)
        guard decoded.frameCount == frames.frameCount else {
            throw HalcyonError(
                .processingFailed, "scoring the \(format.rawValue) output: \(decoded.frameCount) frames, the pixels have \(frames.frameCount)")
        }
        var worst = Double.infinity
        for index in Self.sampled(frames.frameCount) {
            let out = try decoded.frameSamples8(index, for: "score frame \(index)")
            let score: Double
            if index == 0 {
                score = try first.score(pixels: out.pixels, width: out.width, height: out.height, channels: out.channels)
            } else {
                let pixels = try frames.frameSamples8(index, for: "score frame \(index)")
                guard (pixels.width, pixels.height) == (out.width, out.height),
                    SSIMULACRA2Reference.canScore(width: pixels.width, height: pixels.height)
                else { continue }
                let reference = try SSIMULACRA2Reference(pixels: pixels.pixels, width: pixels.width, height: pixels.height, channels: pixels.channels)
                score = try reference.score(pixels: out.pixels, width: out.width, height: out.height, channels: out.channels)
            }
            worst = min(worst, score)
        }
        return worst
    }
}
