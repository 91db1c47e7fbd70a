import HalcyonEmbedded
import HalcyonQueue
import HalcyonRuntime
import Testing

/// Tests that keep a core busy inside the test process (decoding and resampling in a debug
/// build) take turns, and run on a thread of their own. Swift Testing runs everything in
/// parallel on a cooperative pool with one thread per core; a test body that computes for
/// seconds holds its pool thread all that time, and with one such test on each thread the
/// end-to-end tests beside them, which poll a database for states that last a second or two,
/// did not get to run their polls (a worker's jobs ran and finished unseen). So a `.cpuHeavy`
/// test's body runs with a task executor preference for `thread`, outside the pool, and such
/// tests take turns on it.
public struct CPUTurns: SuiteTrait, TestTrait, TestScoping {
    private static let turns = AsyncSemaphore(1)
    /// The thread `.cpuHeavy` test bodies run on.
    private static let executor = ThreadExecutor(name: "halcyon.test.cpu-heavy")

    public var isRecursive: Bool { true }

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?,
        performing function: @Sendable () async throws -> Void
    ) async throws {
        // An end-to-end test (`.processes`) waits for its process slots, not for a turn here:
        // two semaphores taken in an order nobody fixes could deadlock. It still runs on the thread.
        if test.traits.contains(where: { $0 is ProcessTurns }) {
            try await withTaskExecutorPreference(Self.executor) { try await function() }
            return
        }
        try await Self.turns.withPermit {
            try await withTaskExecutorPreference(Self.executor) { try await function() }
        }
    }
}

/// A task executor on one thread of its own (`SerialThread`): the jobs of tasks that prefer
/// it run there, one after another, and never on the cooperative pool.
final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let thread: SerialThread

    init(name: String) { thread = SerialThread(name: name, stackSize: 8 << 20) }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        thread.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

extension Trait where Self == CPUTurns {
    /// Runs the test (or each test of the suite) while no other `.cpuHeavy` test runs.
    public static var cpuHeavy: Self { CPUTurns() }
}

extension EmbeddedCluster {
    /// `ensureRunning()` off the cooperative pool: initdb and pg_ctl take seconds, during which
    /// a pool thread would be lost to every other test.
    public func started() async throws {
        _ = try await Blocking.run { try self.ensureRunning() }
    }

    /// `stop(mode:)` off the cooperative pool.
    public func stopped(mode: String = "fast") async throws {
        try await Blocking.run { try self.stop(mode: mode) }
    }
}
