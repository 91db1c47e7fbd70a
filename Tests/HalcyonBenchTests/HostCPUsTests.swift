import Testing

@testable import HalcyonBench

/// `--host-cpus`: from 0.05 cores to the machine's CPUs, anything else refused saying so.
struct HostCPUsTests {
    @Test(arguments: [0.05, 0.25, 0.4, 1, 2])
    func acceptsAShareOfTheMachine(_ cores: Double) {
        #expect(Bench.hostCPUsProblem(cores, cpus: 2) == nil)
    }

    @Test(arguments: [0, 0.04, -1, 2.5, 64, .nan, .infinity])
    func refusesWhatNoHostCouldHave(_ cores: Double) throws {
        let problem = try #require(Bench.hostCPUsProblem(cores, cpus: 2))
        #expect(problem.hasPrefix("--host-cpus must be from 0.05 to 2 (this machine's CPUs), not "), "\(problem)")
    }
}
