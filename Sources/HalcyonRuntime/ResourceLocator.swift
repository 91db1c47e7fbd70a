import Foundation

/// Finds a directory shipped beside the binary (`migrations/`, `policy/`): an explicit path,
/// then an environment variable, then `<dir>/NAME` or `<dir>/share/halcyon/NAME` for each
/// directory from the executable's (its real path, however it was started) up to five levels
/// above it (a build tree's `.build/<config>/halcyon`, or an install prefix such as
/// `/opt/halcyon/bin/halcyon`), then the usual install prefixes (`/usr/local/share/halcyon/NAME`,
/// `/usr/share/halcyon/NAME`: a binary copied alone elsewhere), then `./NAME`.
///
/// A directory named by the option or the variable is the only one looked at: when it does not
/// hold `marker`, that is an error naming it (`Misdirected`), never a silent fall-back to the
/// copy beside the binary.
public enum ResourceLocator {
    /// An option or a variable named a directory that does not hold what it should.
    public struct Misdirected: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// The first candidate containing `marker`, and every candidate tried (for error messages).
    /// `option` names `explicit` in errors (`--migrations`); `expected` says what the directory
    /// holds (`Halcyon's migrations, 0001_jobs.sql …`). Throws when `explicit` or the variable
    /// names a directory without `marker`.
    public static func find(
        _ name: String, marker: String, explicit: String? = nil, option: String? = nil,
        environment variable: String, expected: String? = nil
    ) throws(Misdirected) -> (found: URL?, tried: [URL]) {
        let named: (label: String, path: String)? =
            if let explicit {
                (option.map { "\($0) \(explicit)" } ?? explicit, explicit)
            } else if let env = ProcessInfo.processInfo.environment[variable], !env.isEmpty {
                ("\(variable)=\(env)", env)
            } else {
                nil
            }
        if let named {
            let url = URL(fileURLWithPath: named.path)
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory)
            if exists, isDirectory.boolValue, FileManager.default.fileExists(atPath: url.appendingPathComponent(marker).path) {
                return (url, [url])
            }
            let problem = !exists ? "does not exist" : !isDirectory.boolValue ? "is not a directory" : "has no \(marker)"
            throw Misdirected(description: "\(named.label): \(url.path) \(problem); it should be the directory of \(expected ?? marker)")
        }
        var candidates: [URL] = []
        var dir = URL(fileURLWithPath: executablePath).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<6 {
            candidates.append(dir.appendingPathComponent(name))
            candidates.append(dir.appendingPathComponent("share/halcyon/\(name)"))
            dir = dir.deletingLastPathComponent()
        }
        for prefix in installPrefixes { candidates.append(URL(fileURLWithPath: "\(prefix)/share/halcyon/\(name)")) }
        candidates.append(URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(name))
        var seen: Set<String> = []
        candidates = candidates.filter { seen.insert($0.standardizedFileURL.path).inserted }
        let found = candidates.first { FileManager.default.fileExists(atPath: $0.appendingPathComponent(marker).path) }
        return (found, candidates)
    }

    /// Where `scripts/install` and the Debian package put the shared files, when the binary is not
    /// beside them.
    public static let installPrefixes = ["/usr/local", "/usr"]

    /// The running executable's path: `/proc/self/exe` (argv[0] has no directory when the binary
    /// was found on `PATH`, and is relative to a directory the process may have left), else
    /// argv[0].
    public static var executablePath: String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return CommandLine.arguments[0] }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
