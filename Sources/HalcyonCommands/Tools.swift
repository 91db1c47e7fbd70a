import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonRuntime

/// Commands that are programs of their own — the benchmark and the demo link sample-image
/// generation, peers and a local origin that production never runs — and that `halcyon NAME …`
/// runs: `halcyon-NAME` beside this binary (as `scripts/install` and the build put them), else
/// on PATH, with the same arguments (`--help` included). They appear here for `halcyon --help`;
/// `Halcyon.main()` hands them over before any parsing.
enum Tools {
    /// The tools by subcommand name.
    static let names = ["bench", "demo"]

    /// Replaces this process with `halcyon-NAME ARGUMENTS`; when it cannot, says why and exits 1.
    static func exec(_ name: String, _ arguments: [String]) -> Never {
        let program = "halcyon-\(name)"
        guard let path = Sibling.path(program) else {
            FileHandle.standardError.write(
                Data(
                    ("Error: halcyon \(name) runs \(program), which is not beside \(ResourceLocator.executablePath) or on PATH "
                        + "(build it with `swift build --product \(program)`; scripts/install installs it)\n").utf8))
            exit(1)
        }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        execv(path, argv)
        FileHandle.standardError.write(Data("Error: cannot run \(path): \(String(cString: strerror(errno)))\n".utf8))
        exit(1)
    }
}

/// `halcyon bench`: listed here, run by `halcyon-bench`.
struct BenchTool: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract:
            "Measure W1, W2, W3, H, L, S, E and X end to end through the queue, beside Pillow, vipsthumbnail, convert and pgqueuer; or soak (the program halcyon-bench)."
    )
}

/// `halcyon demo`: listed here, run by `halcyon-demo`.
struct DemoTool: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "A guided run: sample images, a local origin with faults, two workers, the status (the program halcyon-demo).")
}
