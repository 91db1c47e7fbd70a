import Foundation

/// Memory figures of a live process, read from `/proc`.
public enum ProcessMemory {
    /// `VmHWM` of a live process (its peak resident set since exec), in bytes.
    public static func peakRSS(of pid: pid_t) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kb = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return nil }
        return kb * 1024
    }
}
