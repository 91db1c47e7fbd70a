import Foundation
import Logging

/// How far this process is into its start-up: wall time since the kernel started it (exec
/// included, so dynamic linking counts) and the CPU time it has used, for the start-up lines a
/// worker logs. Slow starts on a busy machine show as wall time far above CPU time.
public enum StartupClock {
    /// Milliseconds since this process was started, from `/proc/self/stat`'s start time.
    public static var sinceStartMilliseconds: Int? {
        guard let stat = KernelFile.text("/proc/self/stat"),
            let uptime = KernelFile.text("/proc/uptime"),
            let now = Double(uptime.split(separator: " ").first ?? "")
        else { return nil }
        // Fields after the command name (which may hold spaces, so split after its ')'):
        // state is field 3, starttime field 22.
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        guard fields.count > 19, let start = Double(fields[19]), ticks > 0 else { return nil }
        return max(0, Int((now - start / ticks) * 1000))
    }

    /// CPU milliseconds (user and system) this process has used.
    public static var cpuMilliseconds: Int {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let user = Int(usage.ru_utime.tv_sec) * 1000 + Int(usage.ru_utime.tv_usec) / 1000
        let system = Int(usage.ru_stime.tv_sec) * 1000 + Int(usage.ru_stime.tv_usec) / 1000
        return user + system
    }

    /// `since_start_ms` and `cpu_ms`, for a log line.
    public static var metadata: Logger.Metadata {
        ["since_start_ms": "\(sinceStartMilliseconds.map(String.init) ?? "?")", "cpu_ms": "\(cpuMilliseconds)"]
    }

    /// Logs one start-up step at debug level, with `metadata`.
    public static func step(_ logger: Logger, _ step: String) {
        logger.debug("start-up: \(step)", metadata: metadata)
    }
}
