import HalcyonRuntime
import Testing

@Suite struct BlockingTests {
    /// A task's CPU meter adds up what its `run` bodies computed on their threads, however many
    /// hops; a body run without one is not counted.
    @Test func aCPUMeterAddsUpTheBodiesOfItsTask() async throws {
        @Sendable func spin() -> Double {
            var x = 0.0
            for i in 0..<3_000_000 { x += Double(i).squareRoot() }
            return x
        }
        let meter = Blocking.CPUMeter()
        try await Blocking.$cpuMeter.withValue(meter) {
            for _ in 0..<2 { _ = try await Blocking.run { spin() } }
        }
        let counted = meter.seconds
        #expect(counted > 0)
        _ = try await Blocking.run { spin() }
        #expect(meter.seconds == counted, "outside the meter's task-local scope")
    }
}
