import Foundation
import HalcyonRuntime

/// The programs that ship together — `halcyon`, `halcyon-bench`, `halcyon-demo` — find each
/// other here: beside this program (its real path), else on PATH.
package enum Sibling {
    /// The program `name` beside this one, else the first on PATH; nil when neither has it.
    package static func path(_ name: String) -> String? {
        let beside = URL(fileURLWithPath: ResourceLocator.executablePath).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        let onPath = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/\(name)" }
        return onPath.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The `halcyon` the bench's workers and the demo's hints use (plain `halcyon` when none is
    /// found, which then fails to start, naming itself).
    package static var halcyon: String { path("halcyon") ?? "halcyon" }
}
