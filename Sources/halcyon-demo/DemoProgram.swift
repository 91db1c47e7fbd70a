import ArgumentParser
import HalcyonDemo

/// `halcyon-demo`: the guided demo, a program of its own so that the worker's binary does not
/// carry it or the sample images. `halcyon demo …` runs it (beside `halcyon` or on PATH).
@main
enum DemoProgram {
    static func main() async { await Demo.main(nil) }
}
