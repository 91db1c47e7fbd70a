import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonBench

/// P: what a browser fetches from a set or a ladder, and a run on two small images.
struct PictureSetBenchTests {
    typealias Rung = PictureSetBench.Rung

    @Test func aBrowserTakesTheNarrowestRungWideEnoughElseTheWidest() throws {
        let rungs: [ImageFormat: [Rung]] = [
            .avif: [320, 640, 960].map { Rung(width: $0, bytes: $0 * 10) },
            .jpeg: [320, 700].map { Rung(width: $0, bytes: $0 * 20) },
        ]
        func pick(_ need: Int, _ order: [ImageFormat] = PictureSetBench.formats) -> Int? {
            PictureSetBench.Image.fetched(rungs, need: need, order: order)?.rung.width
        }
        #expect(pick(200) == 320 && pick(320) == 320 && pick(321) == 640 && pick(960) == 960 && pick(3840) == 960)
        #expect(pick(720, [.jpeg]) == 700 && pick(360, [.jpeg]) == 700)
        // No rung of the first source's format: the browser reads the next source.
        #expect(PictureSetBench.Image.fetched([.jpeg: rungs[.jpeg]!], need: 360, order: PictureSetBench.formats)?.format == .jpeg)
        #expect(PictureSetBench.Image.fetched([:], need: 360, order: PictureSetBench.formats) == nil)
    }

    @Test(.cpuHeavy) func runsOnTwoSmallImagesAndReportsItsKeys() throws {
        let sources = try [(400, 300, 1), (700, 500, 2)].map { w, h, seed in
            PictureSetBench.Source(
                name: "p\(seed).jpg", data: try SampleImages.photo(width: w, height: h, seed: UInt64(seed), quality: 92), format: .jpeg,
                group: seed == 1 ? .real : .corpus)
        }
        let run = try PictureSetBench.run(sources, corpusNote: "test images")
        #expect(run.images.map(\.ladderWidths) == [[320, 400], [320, 640, 700]])
        for f in PictureSetBench.formats {
            let q = try #require(run.quality[f])
            #expect((1...100).contains(q))
            // The run's quality is at least every image's own, and where it holds, every rung does.
            #expect(run.images.allSatisfy { ($0.ownQuality[f] ?? 100) <= q })
            if run.held[f] == true { #expect(run.images.allSatisfy { !($0.ladder[f] ?? []).contains(where: \.missesFloor) }) }
            #expect(run.images.allSatisfy { $0.ladder[f]?.map(\.width) == $0.ladderWidths })
        }
        // The set's widths never go above the image's, its fallback always has a rung.
        #expect(run.images.allSatisfy { image in image.set.values.joined().allSatisfy { $0.width <= image.width } })
        #expect(run.images.allSatisfy { !($0.set[.jpeg] ?? []).isEmpty && $0.setCPU > 0 && $0.ladderCPU > 0 })
        #expect(run.fetches(run.images).count == PictureSetBench.viewports.count * PictureSetBench.dprs.count)
        #expect(run.table.contains("P — picture sets") && run.table.contains("own-Q ladder"))
        let json = run.json
        for key in ["chain", "ladder_widths", "floor", "ladder_quality", "ladder_quality_held", "images", "totals", "set_rungs_below_floor"] {
            #expect(json[key] != nil, "\(key)")
        }
        #expect(json["totals"]?["all"]?["fetches"]?.arrayValue?.count == 8)
        #expect(json["totals"]?["real"]?["images"]?.numberValue == 1 && json["totals"]?["corpus"]?["images"]?.numberValue == 1)
    }
}
