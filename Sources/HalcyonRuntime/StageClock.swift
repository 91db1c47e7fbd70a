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
