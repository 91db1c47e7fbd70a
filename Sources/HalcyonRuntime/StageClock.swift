import Foundation

/// Wall time and this thread's CPU time since a start, lap by lap: what a stage that runs on
/// one thread (decode, process, encode, store) took, and how much of that it computed.
public struct StageClock: Sendable {
    private var wall = ContinuousClock.now
    private var cpu = StageClock.threadCPUSeconds()

    public init() {}

    /// Seconds since `init` or the previous lap, wall and on-thread CPU; starts the next lap.
    public mutating func lap() -> (wall: Double, cpu: Double) {
        let now = ContinuousClock.now, cpuNow = Self.threadCPUSeconds()
        defer { (wall, cpu) = (now, cpuNow) }
        return ((now - wall).seconds, max(0, cpuNow - cpu))
    }

    /// CPU seconds the calling thread has used.
    public static func threadCPUSeconds() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }
}

/// Threads' CPU time by their kernel id: what a supervisor reads of its child's processing
/// thread, which the child names in its reports.
public enum ThreadCPU {
    /// The calling thread's kernel id (its entry under `/proc/PID/task`); nil if it cannot be
    /// read. (Glibc's `gettid` is not imported: `/proc/thread-self` names it.)
    public static func currentThread() -> Int32? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer -> Int32? in
            let n = readlink("/proc/thread-self", buffer.baseAddress!, buffer.count)
            guard n > 0, n < buffer.count else { return nil }
            let text = String(decoding: UnsafeRawBufferPointer(start: buffer.baseAddress, count: n), as: UTF8.self)
            return text.split(separator: "/").last.flatMap { Int32($0) }
        }
    }

    /// The CPU seconds thread `thread` of process `process` has used, from its `schedstat` (the
    /// scheduler's own count, in nanoseconds, as `CLOCK_THREAD_CPUTIME_ID` reads it); nil once the
    /// thread is gone.
    public static func seconds(thread: Int32, process: pid_t) -> Double? {
        guard let text = KernelFile.text("/proc/\(process)/task/\(thread)/schedstat"),
            let first = text.split(separator: " ").first, let ns = UInt64(first)
        else { return nil }
        return Double(ns) / 1e9
    }
}
