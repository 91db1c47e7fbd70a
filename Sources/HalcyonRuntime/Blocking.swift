import Synchronization

/// Runs blocking C calls (MagickWand, store I/O, file reads) on threads of Halcyon's own, never
/// on the threads Swift's executor runs tasks on. (A libpq connection has a thread of its own:
/// `SerialThread`.)
///
/// Not Dispatch: on Linux a concurrent queue runs on libdispatch's default pool — about one
/// thread per core, the same threads Swift's global executor uses — so two long ImageMagick
/// calls on two cores held back every timer, lease renewal and release in the process until
/// one ended (a worker told to stop took up to a minute to release its jobs under load). A
/// queue per call (the overcommit pool) fixed that but cost store hits about 8 % in thread
/// churn. Here each call takes an idle thread of its pool, or starts one when all are busy,
/// and gives it back when done; callers bound how many run at once (the processing and
/// download slots).
public enum Blocking {
    /// Which threads a call runs on. Image processing has threads of its own: as many as run
    /// at once (the processing slots), reused, never shared with a file read or a download.
    public enum Pool: Sendable {
        /// Downloads, file reads and writes, store work, waits for a child process.
        case io
        /// Decoding, processing and encoding images.
        case processing
    }

    /// Idle threads kept per pool for the next calls; more than this end when they finish.
    static let maxIdle = 64
    /// ImageMagick's deepest calls need more than a connection thread's 1 MiB.
    static let stackSize = 8 << 20

    private static let idleIO = Mutex<[SerialThread]>([])
    private static let idleProcessing = Mutex<[SerialThread]>([])

    /// Adds up the CPU time the bodies of `run` take on their threads, for a task that sets it
    /// (`$cpuMeter.withValue`) around work that hops to these threads once or many times — a
    /// store's write, whose CPU a job's usage counts wherever it ran.
    public final class CPUMeter: Sendable {
        private let total = Mutex<Double>(0)

        public init() {}

        /// CPU seconds the bodies run under this meter took so far.
        public var seconds: Double { total.withLock { $0 } }

        func add(_ seconds: Double) { total.withLock { $0 += seconds } }
    }

    /// The meter `run` adds its bodies' CPU time to, when the calling task has one.
    @TaskLocal public static var cpuMeter: CPUMeter?

    /// Runs `body` on a thread of `pool` and resumes with its result.
    public static func run<T: Sendable>(_ pool: Pool = .io, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        let thread = idle(pool) { $0.popLast() } ?? SerialThread(name: pool == .io ? "halcyon.io" : "halcyon.image", stackSize: stackSize)
        let meter = cpuMeter
        return try await withCheckedThrowingContinuation { continuation in
            thread.async {
                let started = meter == nil ? 0 : StageClock.threadCPUSeconds()
                let result = Result { try body() }
                meter?.add(max(0, StageClock.threadCPUSeconds() - started))
                // Back in the pool before resuming: the resumed task's next call may reuse it
                // (it runs whatever it is given after this item ends).
                let kept = idle(pool) { threads in
                    guard threads.count < maxIdle else { return false }
                    threads.append(thread)
                    return true
                }
                if !kept { thread.finish() }
                continuation.resume(with: result)
            }
        }
    }

    private static func idle<R: Sendable>(_ pool: Pool, _ body: (inout sending [SerialThread]) -> sending R) -> R {
        switch pool {
        case .io: idleIO.withLock(body)
        case .processing: idleProcessing.withLock(body)
        }
    }
}
