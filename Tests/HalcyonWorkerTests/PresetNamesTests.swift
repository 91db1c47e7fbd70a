import HalcyonDomain
import HalcyonQueue
import Testing

@testable import HalcyonWorker

/// The presets a claimed batch needs are found by the chain grammar, and read only when a chain
/// names one.
struct PresetNamesTests {
    @Test func onlyChainsThatNamePresetsAreParsedForThem() {
        let jobs = [
            Job(id: 1, source: "https://e.com/a.jpg", processors: "resize(10x10)"),
            Job(id: 2, source: "https://e.com/a.jpg", processors: "PRESET(Thumb) |> preset(name=card)"),
            Job(id: 3, source: "https://e.com/b.jpg", processors: "preset(thumb)"),
            // The word, but no preset step: nothing to read.
            Job(id: 4, source: "https://e.com/c.jpg", processors: #"watermark("https://e.com/preset.png")"#),
            // Does not parse: the plan reports that.
            Job(id: 5, source: "https://e.com/d.jpg", processors: "preset(thumb"),
        ]
        #expect(JobPlan.presetNames(jobs) == ["PRESET(Thumb) |> preset(name=card)": ["thumb", "card"], "preset(thumb)": ["thumb"]])
        #expect(JobPlan.presetNames(Array(jobs.prefix(1))).isEmpty)
        #expect(!JobPlan.mentionsPreset("resize(10x10)") && JobPlan.mentionsPreset("x PrEsEt") && !JobPlan.mentionsPreset("pres"))

        let thumb = Preset(name: "thumb", processors: "resize(64x64)"), card = Preset(name: "card", processors: "flip")
        let filled = JobPlan.with(presets: ["thumb": thumb, "card": card], named: JobPlan.presetNames(jobs), jobs)
        #expect(filled.map(\.presets) == [[:], ["thumb": thumb, "card": card], ["thumb": thumb], [:], [:]])
        // A preset the database does not have stays missing: the chain fails as `unknown preset`.
        let missing = JobPlan.with(presets: [:], named: JobPlan.presetNames(jobs), jobs)
        var memo = JobPlan.Memo()
        let plan = JobPlan(missing[2], maxDataBytes: 1 << 20, memo: &memo)
        guard case .failure(let error) = plan.validated else {
            Issue.record("a chain naming a missing preset is invalid")
            return
        }
        #expect(error.code == .invalidChain && error.message.contains("unknown preset 'thumb'"))
    }
}
