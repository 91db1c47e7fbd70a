internal import CMalloc
import Foundation

/// Memory figures of a live process, read from `/proc`.
public enum ProcessMemory {
    /// `VmHWM` of a live process (its peak resident set since exec), in bytes.
    public static func peakRSS(of pid: pid_t) -> Int? {
        statusBytes("VmHWM:", of: pid)
    }

    /// `VmRSS` of a live process (its resident set now), in bytes.
    public static func residentRSS(of pid: pid_t) -> Int? {
        statusBytes("VmRSS:", of: pid)
    }

    /// The live children of a process (`/proc/PID/task/*/children`: each thread lists the
    /// children it started).
    public static func children(of pid: pid_t) -> [pid_t] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.flatMap { task in
            (KernelFile.text("/proc/\(pid)/task/\(task)/children") ?? "").split(separator: " ").compactMap {
                pid_t($0)
            }
        }.sorted()
    }

    private static func statusBytes(_ field: String, of pid: pid_t) -> Int? {
        guard let text = KernelFile.text("/proc/\(pid)/status"),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix(field) }),
            let kb = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return nil }
        return kb * 1024
    }

    /// glibc's `M_MMAP_THRESHOLD`: sets a fixed threshold (which also stops glibc raising it by
    /// itself). False when glibc refuses the value.
    @discardableResult
    public static func setMmapThreshold(_ bytes: Int) -> Bool {
        mallopt(M_MMAP_THRESHOLD, Int32(clamping: bytes)) == 1
    }

    /// Whether the environment's `GLIBC_TUNABLES` sets the mmap threshold itself.
    public static var tunablesSetMmapThreshold: Bool {
        ProcessInfo.processInfo.environment["GLIBC_TUNABLES"]?.contains("malloc.mmap_threshold") == true
    }
}
