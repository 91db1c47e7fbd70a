import Foundation
import HalcyonEmbedded
import HalcyonRuntime

extension Subprocess {
    /// What a finished child used.
    public struct Usage: Sendable {
        public var status: Int32
        /// Peak resident set size in bytes.
        public var peakRSS: Int
        /// User + system CPU seconds.
        public var cpuSeconds: Double
    }

    /// Waits for `pid` and returns its exit status and resource usage. CPU time comes from
    /// `wait4` (which includes the children it waited for); the peak RSS is the largest `VmHWM`
    /// of the child and its own children, sampled every `sampleInterval`
    /// seconds while it runs — `ru_maxrss` cannot be trusted for spawned children, because
    /// Linux folds the spawning process's high-water mark into it at `exec`.
    public static func waitWithUsage(_ pid: pid_t, sampleInterval: Double = 0.005) -> Usage {
        var peak = 0
        while true {
            // A supervised worker (`halcyon work`) does its work in a child: its peak counts.
            for p in [pid] + ProcessMemory.children(of: pid) {
                if let hwm = ProcessMemory.peakRSS(of: p) { peak = max(peak, hwm) }
            }
            if let (status, cpu) = reap(pid, block: false) { return Usage(status: status, peakRSS: peak, cpuSeconds: cpu) }
            usleep(UInt32(sampleInterval * 1e6))
        }
    }
}
