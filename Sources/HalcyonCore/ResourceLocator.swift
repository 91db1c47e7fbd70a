import Foundation

/// Finds a directory shipped beside the binary (`migrations/`, `policy/`): an explicit path,
/// then an environment variable, then `<dir>/NAME` or `<dir>/share/halcyon/NAME` for each
/// directory from the executable's up to five levels above it (a build tree's
/// `.build/<config>/halcyon`, or an install prefix), then `./NAME`.
public enum ResourceLocator {
    /// The first candidate containing `marker`, and every candidate tried (for error messages).
    public static func find(
        _ name: String, marker: String, explicit: String? = nil,
        environment variable: String
    ) -> (found: URL?, tried: [URL]) {
        var candidates: [URL] = []
        if let explicit { candidates.append(URL(fileURLWithPath: explicit)) }
        if let env = ProcessInfo.processInfo.environment[variable], !env.isEmpty { candidates.append(URL(fileURLWithPath: env)) }
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<6 {
            candidates.append(dir.appendingPathComponent(name))
            candidates.append(dir.appendingPathComponent("share/halcyon/\(name)"))
            dir = dir.deletingLastPathComponent()
        }
        candidates.append(URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(name))
        let found = candidates.first { FileManager.default.fileExists(atPath: $0.appendingPathComponent(marker).path) }
        return (found, candidates)
    }
}
