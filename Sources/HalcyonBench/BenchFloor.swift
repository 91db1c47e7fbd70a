import Foundation
import HalcyonCLI
import HalcyonDomain
import HalcyonImage
import HalcyonRuntime
import Synchronization

/// The decode floor: every corpus file read and decoded in this process by the direct lane's
/// decoder (libjpeg-turbo at the scale Halcyon decodes it for the scenario's chains, libpng in
/// full) and nothing else — no resize, no encode, no queue, no store — by `concurrency`
/// threads each taking the next file. No tool can do the scenario faster than this without
/// decoding less, so each run says how far every tool is from the limit.
enum BenchFloor {
    static let tool = "decode floor"

    static func run(_ corpus: BenchCorpus, chains: [String], concurrency: Int) async throws -> BenchRun {
        let parsed = try chains.map { try ProcessorChain.parse($0) }
        let files = corpus.files.map(\.path)
        return try await Blocking.run {
            let next = Atomic<Int>(0), failed = Atomic<Int>(0)
            let cpuBefore = processCPUSeconds()
            let started = ContinuousClock.now
            let done = DispatchGroup()
            for _ in 0..<concurrency {
                done.enter()
                Thread.detachNewThread {
                    defer { done.leave() }
                    while true {
                        let i = next.wrappingAdd(1, ordering: .relaxed).oldValue
                        guard i < files.count else { return }
                        let format: ImageFormat = files[i].hasSuffix(".png") ? .png : .jpeg
                        guard let data = FileManager.default.contents(atPath: files[i]), decode(data, format, for: parsed) else {
                            failed.add(1, ordering: .relaxed)
                            continue
                        }
                    }
                }
            }
            done.wait()
            let seconds = (ContinuousClock.now - started).seconds
            let failures = failed.load(ordering: .relaxed)
            guard failures == 0 else { throw CommandFailure("decode floor: \(failures) corpus files are not decodable by the direct lane") }
            return BenchRun(seconds: seconds, cpuSeconds: processCPUSeconds() - cpuBefore, peakRSS: 0, images: files.count)
        }
    }

    /// The decode `ImagePipeline.run` makes of this source for `chains` in the direct lane, and
    /// nothing else; false when the direct lane would not take it.
    static func decode(_ data: Data, _ format: ImageFormat, for chains: [ProcessorChain]) -> Bool {
        guard chains.allSatisfy(DirectLane.accepts), let source = DirectLane.source(data, format: format) else { return false }
        return DirectLane.decode(data, source, hint: ImagePipeline.shrinkHint(chains, source.header)) != nil
    }

    /// This process's user + system CPU seconds so far.
    static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
            + Double(usage.ru_stime.tv_usec) / 1e6
    }
}
