import Foundation
import HalcyonRuntime
import Synchronization
import Testing

/// End-to-end tests take turns starting processes, so that the machine runs about as much as
/// it has cores for.
///
/// Swift Testing starts every test at once: a test that awaits a database or a child process
/// gives its thread back and the next one starts. With ~40 suites starting `halcyon work`
/// (two processes each: supervisor and image process), PostgreSQL clusters, browsers and
/// benches together, the load average reached 65 on 2 cores; a worker then took 18 s to
/// start, and tests waiting 20 s for it failed. A test (or suite) that starts processes
/// carries `.processes` (or `.processes(N)` when it runs N workers at once) and holds that
/// many of `ProcessTurns.capacity` slots while it runs; `HalcyonProcess` refuses to start a
/// process in a test that holds none, so a new end-to-end test cannot forget it.
///
/// The capacity is `HALCYON_TEST_PROCESS_SLOTS`, by default twice the number of cores: most
/// end-to-end tests spend much of their time waiting (for a lease to lapse, a retry, a slow
/// origin), and with twice the cores the machine is busy without being overrun (on 2 cores the
/// load average peaked at 4.7 and the CPU was busy 70 % of the run, which took 322 s; with three
/// slots 429 s at 59 %).
public struct ProcessTurns: SuiteTrait, TestTrait, TestScoping {
    /// The slots this test takes (at most `capacity`: a bigger test runs alone).
    public let weight: Int
    private let id = UUID()

    public var isRecursive: Bool { true }

    /// Slots in all, for the whole test run.
    public static let capacity: Int = {
        let env = ProcessInfo.processInfo.environment["HALCYON_TEST_PROCESS_SLOTS"].flatMap { Int($0) }
        return max(1, env ?? ProcessInfo.processInfo.activeProcessorCount * 2)
    }()

    static let slots = WeightedSemaphore(capacity)
    /// When the first test asked for slots (the turns log's times count from here).
    static let origin = ContinuousClock.now

    /// The slots the running test holds (0 outside a `.processes` test).
    @TaskLocal public static var held = 0

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        // Each test case takes its slots, but the cases of a serialized parameterized test (one
        // after another) take them once for all: queueing again for every case would put the
        // whole test at the back of the line over and over.
        let holdsForAllCases = !test.isSuite && test.isParameterized && test.traits.contains { $0 is ParallelizationTrait }
        guard holdsForAllCases ? testCase == nil : testCase != nil else { return nil }
        // A suite's trait reaches its tests beside their own: only the heaviest one applies (the
        // first of equals), or the test would wait for its own slots.
        let all = test.traits.compactMap { $0 as? ProcessTurns }
        let heaviest = all.max { $0.weight < $1.weight }?.weight
        return all.first { $0.weight == heaviest }?.id == id ? self : nil
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?,
        performing function: @Sendable () async throws -> Void
    ) async throws {
        let n = min(weight, Self.capacity)
        let asked = ContinuousClock.now
        _ = Self.origin
        await Self.slots.acquire(n)
        let granted = ContinuousClock.now
        // The cases of a parameterized test run at once under one test id: each gets a token.
        let scope = UUID().uuidString
        defer {
            Self.slots.release(n)
            Self.record(
                test: test, slots: n, waited: granted - asked, held: .now - granted, at: granted - Self.origin,
                processCPU: HalcyonProcess.takeCPU(of: scope))
        }
        try await Self.$held.withValue(n) {
            defer { HalcyonProcess.endAll(startedIn: scope) }
            do {
                try await HalcyonProcess.$owner.withValue(scope) { try await function() }
            } catch {
                await Self.runEndings(of: scope)
                throw error
            }
            await Self.runEndings(of: scope)
        }
    }

    /// What must end with the test case now running (an in-process worker still running), by
    /// the scope that registered it.
    private static let endings = Mutex<[String: [@Sendable () async -> Void]]>([:])

    /// Runs `body` when the test case now running ends, whatever its outcome (before the
    /// processes it started are killed). Outside a `.processes` test it is never run.
    public static func atEnd(_ body: @escaping @Sendable () async -> Void) {
        guard let scope = HalcyonProcess.owner else { return }
        endings.withLock { $0[scope, default: []].append(body) }
    }

    private static func runEndings(of scope: String) async {
        let bodies = endings.withLock { $0.removeValue(forKey: scope) ?? [] }
        for body in bodies { await body() }
    }
}

extension ProcessTurns {
    /// Appends one line per test case to `$HALCYON_TEST_WORK/process-turns.log` (scripts/test
    /// prints the longest holders): slots, seconds waited, seconds held, when the slots were
    /// granted (seconds since the first test asked), the CPU seconds of the processes it
    /// started (as they were reaped), the test.
    static func record(test: Test, slots: Int, waited: Duration, held: Duration, at: Duration, processCPU: Double) {
        guard let work = ProcessInfo.processInfo.environment["HALCYON_TEST_WORK"] else { return }
        let line = String(format: "%d %.1f %.1f %.1f %.1f %@\n", slots, waited.seconds, held.seconds, at.seconds, processCPU, test.name)
        log.withLock { _ in
            guard let handle = FileHandle(forWritingAtPath: work + "/process-turns.log") ?? createLog(work + "/process-turns.log") else { return }
            handle.seekToEndOfFile()
            handle.write(Data(line.utf8))
            try? handle.close()
        }
    }
    private static let log = Mutex(())
    private static func createLog(_ path: String) -> FileHandle? {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        return FileHandle(forWritingAtPath: path)
    }

    /// Runs `body`, which starts processes for a fixture shared by several suites (made once, by
    /// whichever test asks first), without taking a slot: tests holding slots may be waiting for
    /// it, and a fixture waiting for their slots would wait forever. Such fixtures are few and
    /// short.
    public static func sharedFixture<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try await $held.withValue(max(held, 1)) { try await body() }
    }
}

extension Trait where Self == ProcessTurns {
    /// The test (or each test of the suite) runs a worker in the test process (`TestWorker`): it
    /// waits for a slot of the same pool the process-starting tests take turns on.
    public static var workers: Self { ProcessTurns(weight: 1) }
    /// The test runs `count` workers at once in the test process: it takes that many slots.
    public static func workers(_ count: Int) -> Self { ProcessTurns(weight: max(1, count)) }
    /// The test (or each test of the suite) starts processes: it waits for a slot first.
    public static var processes: Self { ProcessTurns(weight: 1) }
    /// The test runs `workers` processes (or process trees) at once: it takes that many slots.
    public static func processes(_ workers: Int) -> Self { ProcessTurns(weight: max(1, workers)) }
}

/// A first-come, first-served semaphore whose waiters take several permits at once. A waiter
/// that wants more than is free waits, and so does everyone behind it: a heavy test is not
/// starved by light ones slipping past.
final class WeightedSemaphore: Sendable {
    private struct Waiter {
        var permits: Int
        var continuation: CheckedContinuation<Void, Never>
    }
    private struct State {
        var available: Int
        var waiters: [Waiter] = []
    }
    private let state: Mutex<State>

    init(_ permits: Int) { state = Mutex(State(available: permits)) }

    func acquire(_ permits: Int) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.waiters.isEmpty, s.available >= permits {
                    s.available -= permits
                    return true
                }
                s.waiters.append(Waiter(permits: permits, continuation: c))
                return false
            }
            if now { c.resume() }
        }
    }

    func release(_ permits: Int) {
        let ready = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.available += permits
            var ready: [CheckedContinuation<Void, Never>] = []
            while let first = s.waiters.first, first.permits <= s.available {
                s.available -= first.permits
                ready.append(s.waiters.removeFirst().continuation)
            }
            return ready
        }
        for c in ready { c.resume() }
    }
}
