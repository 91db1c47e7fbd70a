import Foundation
import HalcyonCore

/// Where the programs that ship beside `halcyon` (`halcyon-bench`, `halcyon-demo`) find it.
package enum Sibling {
    /// The `halcyon` beside this program (its real path), else the first on PATH, else plain
    /// `halcyon` (which then fails to start, naming itself).
    package static var halcyon: String {
        let beside = URL(fileURLWithPath: ResourceLocator.executablePath).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("halcyon").path
        if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        let onPath = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/halcyon" }
        return onPath.first { FileManager.default.isExecutableFile(atPath: $0) } ?? "halcyon"
    }
}
