import ArgumentParser
import HalcyonBench

/// `halcyon-bench`: the benchmark, a program of its own so that the worker's binary does not
/// carry it. `halcyon bench …` runs it (it must be beside `halcyon` or on PATH).
@main
enum BenchProgram {
    static func main() async { await Bench.main(nil) }
}
