import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonRuntime
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// Bounded work: a chain's estimated work is checked against the limit before anything is
/// decoded, and the deadline stops the work that gets past the estimate.
@Suite(.cpuHeavy) struct WorkLimitTests {
    func isTooCostly(_ error: any Error, _ text: String) -> Bool {
        (error as? HalcyonError)?.code == .tooCostly && "\(error)".contains(text)
    }

    /// A PNG that declares `width`×`height` (with a valid IHDR) and holds one row of data: the
    /// plan reads only the header, so the chain is refused before a decoder sees the rest.
    static func declaredPNG(width: Int, height: Int) -> Data {
        func crc32(_ bytes: Data) -> UInt32 {
            var c: UInt32 = 0xFFFF_FFFF
            for b in bytes {
                c ^= UInt32(b)
                for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
            }
            return ~c
        }
        func be(_ v: UInt32) -> Data { withUnsafeBytes(of: v.bigEndian) { Data($0) } }
        func chunk(_ type: String, _ body: Data) -> Data {
            let typed = Data(type.utf8) + body
            return be(UInt32(body.count)) + typed + be(crc32(typed))
        }
        let ihdr = be(UInt32(width)) + be(UInt32(height)) + Data([8, 0, 0, 0, 0])
        // One gray row (filter byte and zeros) in a stored deflate block, in a zlib stream.
        let row = Data(count: 1 + width)
        var (a, b): (UInt32, UInt32) = (1, 0)
        for byte in row { (a, b) = ((a + UInt32(byte)) % 65521, (b + (a + UInt32(byte)) % 65521) % 65521) }
        let n = UInt16(row.count)
        let zlib = Data([0x78, 0x01, 0x01, UInt8(n & 0xFF), UInt8(n >> 8), UInt8(~n & 0xFF), UInt8(~n >> 8)]) + row + be(b << 16 | a)
        return Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) + chunk("IHDR", ihdr) + chunk("IDAT", zlib) + chunk("IEND", Data())
    }

    /// A blur of 100 sixty-four times over 100 MP is about 8.5 T pixel-taps: hours. Refused from
    /// the header, before a pixel is decoded.
    @Test func anAbsurdChainIsRefusedBeforeDecoding() throws {
        let header = MagickImage.Header(width: 10_000, height: 10_000, frames: 1, swapsAxes: false)
        let chain = try ProcessorChain.parse(Array(repeating: "blur(100)", count: 64).joined(separator: " |> "))
        #expect { try ImageLimits().plan(chain, from: header.decodedFrameSize, frames: 1) } throws: {
            isTooCostly($0, "over the limit of 120 G")
        }
        // One blur of 100 over 4 MP (about 5 s here) is within it; so is a thumbnail of 100 MP.
        try ImageLimits().plan(try ProcessorChain.parse("blur(100)"), from: ImageSize(width: 2000, height: 2000), frames: 1)
        try ImageLimits().plan(try ProcessorChain.parse("resize(256x256) |> sharpen(1)"), from: header.decodedFrameSize, frames: 1)
        // The limit follows the deadline: a tenth of the time, a tenth of the work.
        var limits = ImageLimits()
        limits.maxJobTime = .seconds(12)
        #expect { try limits.plan(try ProcessorChain.parse("blur(100)"), from: ImageSize(width: 4000, height: 4000), frames: 1) } throws: {
            isTooCostly($0, "4000x4000")
        }
        // Through the pipeline: nothing is decoded.
        let counter = ImagePipeline.DecodeCounter()
        let png = Self.declaredPNG(width: 10_000, height: 10_000)
        ImagePipeline.$observer.withValue(counter) {
            #expect { try ImagePipeline.run(png, format: .png, chain: chain) } throws: { isTooCostly($0, "an image of 10000x10000") }
        }
        #expect(counter.count == 0)
    }

    /// Past the deadline the work stops at its next check with `image.too_costly`, not at the
    /// end: thirty blurs of 20 over 4 MP (about 15 s here) against 1 s — with the estimate told
    /// the machine is a hundred times faster, so that the chain gets past it.
    @Test func theDeadlineStopsTheWork() throws {
        let photo = try SampleImages.photo(width: 2000, height: 2000, seed: 4, format: .jpeg)
        var limits = ImageLimits()
        limits.maxJobTime = .seconds(1)
        limits.pixelTapsPerSecond = 1e11
        let chain = try ProcessorChain.parse(Array(repeating: "blur(20)", count: 30).joined(separator: " |> ") + " |> format(png)")
        try limits.plan(chain, from: ImageSize(width: 2000, height: 2000), frames: 1)
        let started = ContinuousClock.now
        #expect { try ImagePipeline.run(photo, format: .jpeg, chain: chain, limits: limits) } throws: {
            isTooCostly($0, "took longer than the 1s limit")
        }
        let took = ContinuousClock.now - started
        print("30 × blur(20) over 4 MP against a 1 s deadline: stopped after \(took)")
        // An operator's cancel is not a deadline: the same flag raised without a reason abandons.
        let cancel = CancellationFlag()
        cancel.cancel()
        #expect { try ImagePipeline.run(photo, format: .jpeg, chains: [chain], limits: limits, cancel: cancel) } throws: {
            ($0 as? HalcyonError)?.code == .cancelled
        }
    }
    /// What a run spent is known whatever its outcome — usage bills a chain stopped by its
    /// deadline, and a decode that failed, what they took: the cost of a run where one chain runs
    /// past its deadline adds up to the CPU its thread used (within 5 %); a success's encode is
    /// the one it measured; a source refused before any chain began costs its shared work only.
    @Test func aRunsCostIsWhatItsThreadSpentWhateverItsOutcome() throws {
        let photo = try SampleImages.photo(width: 2000, height: 2000, seed: 4, format: .jpeg)
        var limits = ImageLimits()
        // Wall-clock time: the quick chain (about 0.1 s alone) must finish within it on a machine
        // whose load average is 20; the slow one (about 15 s alone) must not.
        limits.maxJobTime = .seconds(4)
        limits.pixelTapsPerSecond = 1e11
        let quick = try ProcessorChain.parse("resize(300x300, mode=fill) |> blur(2) |> format(png)")
        let slow = try ProcessorChain.parse(Array(repeating: "blur(20)", count: 30).joined(separator: " |> ") + " |> format(png)")
        func measured(_ chains: [ProcessorChain], _ data: Data = photo, limits: ImageLimits) -> (MeasuredRun, used: Double) {
            let before = StageClock.threadCPUSeconds()
            let run = ImagePipeline.measured(data, format: .jpeg, chains: chains, limits: limits)
            return (run, StageClock.threadCPUSeconds() - before)
        }
        let (run, used) = measured([quick, slow], limits: limits)
        let results = try run.outcome.get()
        #expect { try results[1].get() } throws: { isTooCostly($0, "took longer than the 4s limit") }
        let cost = run.cost
        print("cost: shared \(cost.shared.cpu) s, chains \(cost.chains), of \(used) s used")
        #expect(cost.shared.cpu > 0 && cost.chains[1].process > 0 && cost.chains[1].encode == 0, "\(cost.chains)")
        #expect(abs(cost.cpu - used) <= 0.05 * used + 0.002, "the run's cost \(cost.cpu) s, its thread used \(used) s")

        // A success, with all the time it needs: its encode as it measured it, and the run's cost
        // all its thread used.
        let (done, doneUsed) = measured([quick], limits: ImageLimits())
        let image = try done.outcome.get()[0].get()
        #expect(done.cost.chains[0].encode == image.encodeCPUSeconds && done.cost.chains[0].process >= image.processCPUSeconds)
        #expect(abs(done.cost.cpu - doneUsed) <= 0.05 * doneUsed + 0.002, "cost \(done.cost.cpu) s, used \(doneUsed) s")

        // A source that fails before any chain began: its cost is the shared work up to there.
        let (broken, brokenUsed) = measured([quick, slow], photo.prefix(photo.count / 2), limits: limits)
        #expect { try broken.outcome.get() } throws: { ($0 as? HalcyonError)?.code == .decodeFailed }
        #expect(broken.cost.chains.allSatisfy { $0 == (0, 0) } && broken.cost.shared.cpu <= brokenUsed + 1e-6)
    }
}
