import Foundation
import HalcyonImage

/// The PNG chart `halcyon bench` writes beside its JSON: W1 images/s and W2 sources/s per
/// tool (median bar, min–max whisker; Halcyon highlighted) and H's store-hit rate.
enum BenchChart {
    static func make(w1: [BenchResult], w2: [BenchResult], hits: [HitRun], corpus: BenchCorpus, concurrency: Int, repeats: Int) throws -> Data {
        func bars(_ results: [BenchResult]) -> [BarChart.Bar] {
            results.map { .init(label: $0.tool, value: $0.rate, low: $0.rateMin, high: $0.rateMax, highlighted: $0.tool == "halcyon") }
        }
        var groups = [BarChart.Group(title: "W1 — \(Bench.chain)", unit: "images/s", bars: bars(w1))]
        if !w2.isEmpty { groups.append(.init(title: "W2 — three variants per source", unit: "sources/s", bars: bars(w2))) }
        if !hits.isEmpty {
            let rates = hits.map(\.jobsPerSecond)
            groups.append(
                .init(
                    title: "H — store hits, one worker", unit: "jobs/s",
                    bars: [.init(label: "halcyon", value: median(rates), low: rates.min()!, high: rates.max()!, highlighted: true)]))
        }
        let footer =
            "\(corpus.summary) · \(concurrency) at a time · median of \(repeats) · \(ProcessInfo.processInfo.activeProcessorCount) cores · corpus \(corpus.fingerprint.prefix(12))"
        return try BarChart(title: "halcyon bench", groups: groups, footer: footer).png()
    }
}
