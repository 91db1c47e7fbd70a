import Foundation
import HalcyonCLI
import HalcyonDomain
import HalcyonImage
import HalcyonQualityReference

/// The bench's quality guard: for a sample of the corpus (the first two images of each kind),
/// each tool's W1 output is compared with a reference made by full decode + ImageMagick's
/// Lanczos resize + centre crop (`QualityReference`). Halcyon must stay within
/// `tolerance` dB of the ImageMagick peers: no speed bought with quality.
struct BenchQuality: Sendable {
    /// Corpus indices of the sample and their reference samples.
    var samples: [(index: Int, reference: [UInt16])]
    static let tolerance = 0.5

    static func make(_ corpus: BenchCorpus) throws -> BenchQuality {
        var picked: [Int] = [], seen: [String: Int] = [:]
        for (i, f) in corpus.files.enumerated() {
            let kind = "\(f.width)x\(f.height)"
            if seen[kind, default: 0] < 2 { picked.append(i); seen[kind, default: 0] += 1 }
        }
        return BenchQuality(
            samples: try picked.map { i in
                let f = corpus.files[i]
                guard let data = FileManager.default.contents(atPath: f.path) else { throw CommandFailure("cannot read \(f.path)") }
                return (i, try QualityReference.fill(data, format: f.path.hasSuffix(".png") ? .png : .jpeg, width: 320, height: 320))
            })
    }

    /// Mean PSNR (dB) of the outputs `path(index)` names against the references; nil when one
    /// is missing or not a 320×320 image.
    func score(_ path: (Int) -> String?) -> Double? {
        var total = 0.0
        for s in samples {
            guard let p = path(s.index), let data = FileManager.default.contents(atPath: p),
                let db = QualityReference.psnr(data, format: .jpeg, against: s.reference)
            else { return nil }
            total += db
        }
        return samples.isEmpty ? nil : total / Double(samples.count)
    }

    /// The verdict: Halcyon within `tolerance` dB of the best ImageMagick peer (nil: nothing to compare).
    static func verdict(_ results: [BenchResult]) -> (passed: Bool, line: String)? {
        guard let h = results.first(where: { $0.tool == "halcyon" })?.psnr else { return nil }
        let peers = results.filter { $0.tool != "halcyon" && $0.psnr != nil }
        var line = String(format: "quality — PSNR against a full-decode Lanczos reference: halcyon %.2f dB", h)
        for p in peers { line += String(format: ", %@ %.2f dB", p.tool, p.psnr!) }
        let magick = peers.filter { $0.tool.hasPrefix("convert") }
        guard !magick.isEmpty else { return (true, line + " (no ImageMagick peer to hold it to)") }
        let floor = magick.map { $0.psnr! }.max()! - tolerance
        let passed = h >= floor
        return (
            passed, line + String(format: "; guard (≥ %.2f dB, within %.1f dB of ImageMagick): %@", floor, tolerance, passed ? "passed" : "FAILED")
        )
    }
}
