import Foundation
import HalcyonImage

/// The PNG chart `halcyon bench` writes beside its JSON: W1 images/s, W2 and W3 sources/s per
/// tool, the decode floor among them (median bar, min–max whisker; Halcyon highlighted), and
/// H's store-hit rate beside pgqueuer's no-op rate.
enum BenchChart {
    static func make(
        w1: [BenchResult], w2: [BenchResult], w3: [BenchResult] = [], hits: [HitRun], pgqueuer: [Int: [HitRun]] = [:],
        corpus: BenchCorpus, concurrency: Int, repeats: Int
    ) throws -> Data {
        func bars(_ results: [BenchResult]) -> [BarChart.Bar] {
            results.map { .init(label: $0.tool, value: $0.rate, low: $0.rateMin, high: $0.rateMax, highlighted: $0.tool == "halcyon") }
        }
        var groups: [BarChart.Group] = []
        if !w1.isEmpty { groups.append(.init(title: "W1 — \(Bench.chain)", unit: "images/s", bars: bars(w1))) }
        if !w2.isEmpty { groups.append(.init(title: "W2 — three variants per source", unit: "sources/s", bars: bars(w2))) }
        if !w3.isEmpty { groups.append(.init(title: "W3 — two effect chains per source", unit: "sources/s", bars: bars(w3))) }
        if !hits.isEmpty {
            func bar(_ label: String, _ runs: [HitRun], highlighted: Bool) -> BarChart.Bar {
                let rates = runs.map(\.jobsPerSecond)
                return .init(label: label, value: median(rates), low: rates.min() ?? 0, high: rates.max() ?? 0, highlighted: highlighted)
            }
            groups.append(
                .init(
                    title: "H — store hits, one worker (pgqueuer: no-op jobs)", unit: "jobs/s",
                    bars: [bar("halcyon", hits, highlighted: true)]
                        + pgqueuer.sorted { $0.key < $1.key }.map { bar("pgqueuer batch \($0.key)", $0.value, highlighted: false) }))
        }
        let footer =
            "\(corpus.summary) · \(concurrency) at a time · median of \(repeats) · \(ProcessInfo.processInfo.activeProcessorCount) cores · corpus \(corpus.fingerprint.prefix(12))"
        return try BarChart(title: "halcyon bench", groups: groups, footer: footer).png()
    }
}
