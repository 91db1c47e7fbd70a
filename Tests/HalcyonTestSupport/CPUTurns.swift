import HalcyonCore
import HalcyonEmbedded
import HalcyonQueue
import Testing

/// Tests that keep a core busy inside the test process (decoding and resampling in a debug
/// build) take turns. Swift Testing runs everything in parallel on a cooperative pool with one
/// thread per core; without turns two such tests would hold both threads for seconds, and the
/// end-to-end tests beside them, which poll a database for states that last a second or two,
/// would not get to run their polls.
public struct CPUTurns: SuiteTrait, TestTrait, TestScoping {
    private static let turns = AsyncSemaphore(1)

    public var isRecursive: Bool { true }

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?,
        performing function: @Sendable () async throws -> Void
    ) async throws {
        try await Self.turns.withPermit { try await function() }
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
        try await Blocking.run { try self.ensureRunning() }
    }

    /// `stop(mode:)` off the cooperative pool.
    public func stopped(mode: String = "fast") async throws {
        try await Blocking.run { try self.stop(mode: mode) }
    }
}
