import Foundation
import HalcyonDomain
import HalcyonImage
import HalcyonQueue
import HalcyonRuntime
import Logging
import Synchronization

/// What a supervisor needs to know, with the defaults `halcyon work` documents.
public struct SupervisorConfiguration: Sendable {
    /// The worker id the child runs as (every child of one supervisor uses it, so the jobs a
    /// dead child held are found by it).
    public var workerID: String
    /// The program the child runs. Default: this process's own executable (its path, so that
    /// `ps` shows the child as `halcyon work …` too).
    public var executable = ResourceLocator.executablePath
    /// The child's arguments (after the program name).
    public var arguments: [String]
    /// Above this resident set the child is ended (SIGKILL) and counted as crashed: a runaway
    /// allocation costs the jobs in processing an attempt instead of the host's OOM killer
    /// choosing a victim. Nil (default): no ceiling.
    public var maxMemory: Int?
    /// The child's own processing deadline (`ImageLimits.maxJobTime`), for the decode and for
    /// each job of a group; a group still in processing `stuckGrace` after all of them is stuck
    /// in one call, and the child is ended.
    public var maxJobTime: Duration = ImageLimits.Settings.maxJobTime.defaultValue
    /// Default: the deadline itself, at most 30 s.
    public var stuckGrace: Duration?
    /// A job in processing during this many deaths of the child fails for good, one of
    /// `poisonAfterRange`.
    public var poisonAfter = 2
    /// What `poisonAfter` may be.
    public static let poisonAfterRange = 1...10
    /// The wait before the first restart; doubled after each crash that follows a short life,
    /// up to `maxRestartDelay`.
    public var restartDelay: Duration = .milliseconds(500)
    public var maxRestartDelay: Duration = .seconds(30)
    /// The waits before restarts after crashes in a row: `restartDelay`, doubling, at most
    /// `maxRestartDelay` (or `restartDelay` when that is longer), without jitter.
    var restartBackoff: Backoff { Backoff(doubling: restartDelay, upTo: maxRestartDelay) }
    /// A child that ran this long before it died restarts after `restartDelay` again.
    public var stableAfter: Duration = .seconds(60)
    /// How often the child's memory and stuck jobs are looked at.
    public var watchInterval: Duration = .milliseconds(50)
    /// Deadline of the statements the supervisor runs after a crash (the worker's
    /// `--statement-timeout`). Default: `WorkerConfiguration.Settings.statementTimeout`.
    public var statementTimeout: Duration = WorkerConfiguration.Settings.statementTimeout.defaultValue
    /// The child's `--grace`: a child still running this long after a stop request, plus its own
    /// margin (`Worker.stopMargin`) and `stopBackstop`, is ended — it should have exited itself.
    public var grace: Duration = WorkerConfiguration.Settings.grace.defaultValue
    /// How long past the child's own exit deadline the supervisor waits before ending it.
    public var stopBackstop: Duration = .seconds(10)

    public init(workerID: String, arguments: [String]) {
        self.workerID = workerID
        self.arguments = arguments
    }

    /// `--max-memory` (no default: no ceiling).
    public static let maxMemorySetting = Setting.bytes(
        "--max-memory", default: 0, (64 << 20)...(1 << 50),
        "With the supervisor: end the child (SIGKILL) when its resident memory passes this, as a contained crash",
        detail: "Default: no ceiling.")

    /// Checks the values a command line or a program may set.
    public func validate() throws(HalcyonError) {
        try Self.maxMemorySetting.check(maxMemory)
        let poison = Self.poisonAfterRange
        guard poison.contains(poisonAfter) else {
            throw HalcyonError(.invalidOptions, "poisonAfter must be \(poison.lowerBound)–\(poison.upperBound)")
        }
        guard restartDelay >= .zero, maxRestartDelay >= restartDelay else {
            throw HalcyonError(.invalidOptions, "the restart delays must be ≥ 0 and the maximum at least the first")
        }
    }
}

/// `halcyon work` as a supervisor: a small process that does no image work and runs a child
/// that does (PostgreSQL's postmaster, nginx's master and gunicorn's arbiter work the same
/// way). The child reports over a pipe which jobs are in processing (`ProcessingReport`). When
/// it dies of a signal — a fault in a C library, a Swift trap, an abort, the kernel's OOM
/// killer, the `maxMemory` ceiling — the supervisor charges those jobs an attempt with
/// `worker.crashed` (failed for good after `poisonAfter` such deaths), releases every other job
/// the child held without charging it, counts the restart in `halcyon.workers`, and starts a new
/// child after a backoff. A child that exits by itself (drained, stopped, an error) ends the
/// supervisor with its exit status. Signals are forwarded: SIGTERM/SIGINT stop the child as they
/// would stop an unsupervised worker; one arriving between children ends the supervisor.
public final class Supervisor: Sendable {
    public let configuration: SupervisorConfiguration
    private let conninfo: String
    private let logger: Logger
    private struct State {
        var child: pid_t?
        var stopRequests = 0
        /// When the child must be gone by, after the stop requests so far.
        var exitBy: ContinuousClock.Instant?
    }
    private let state = Mutex(State())
    private let stopped = CancellationFlag()

    public init(configuration: SupervisorConfiguration, conninfo: String, logger: Logger) {
        self.configuration = configuration
        self.conninfo = conninfo
        var logger = logger
        logger[metadataKey: "worker"] = "\(configuration.workerID)"
        logger[metadataKey: "role"] = "supervisor"
        self.logger = logger
    }

    /// The signal by which the supervisor asks its child to stop (SIGUSR1): the child ignores
    /// SIGTERM and SIGINT, so that a signal sent to the whole process group is passed on once.
    public static let stopSignal = SIGUSR1

    /// Forwards a stop to the child (a second one releases its jobs at once), or ends a
    /// supervisor that is between children.
    public func requestStop() {
        let configuration = configuration
        let child = state.withLock { s -> pid_t? in
            s.stopRequests += 1
            let margin = s.stopRequests >= 2 ? Worker.secondStopMargin : configuration.grace + Worker.stopMargin
            let by = ContinuousClock.now + margin + configuration.stopBackstop
            s.exitBy = min(s.exitBy ?? by, by)
            return s.child
        }
        stopped.cancel()
        if let child { kill(child, Self.stopSignal) }
    }

    /// Restarts so far.
    public var restarts: Int { restartCount.load(ordering: .relaxed) }
    private let restartCount = Atomic<Int>(0)

    /// Runs children until one exits by itself (its status is returned) or a stop is requested
    /// while none runs (0).
    public func run() async -> Int32 {
        // Crashes in a row, each after a short life: the wait before a restart doubles with them.
        var crashes = 0
        let restartBackoff = configuration.restartBackoff
        while true {
            if stopped.isCancelled { return 0 }
            let child: ChildProcess
            var environment = ProcessInfo.processInfo.environment
            environment[SupervisorChannel.environmentKey] = "3"
            environment[Self.restartsKey] = String(restarts)
            // A crash's backtrace shows the thread that crashed, unless the operator chose otherwise.
            if environment[Self.backtraceKey] == nil { environment[Self.backtraceKey] = Self.backtraceDefault }
            do {
                child = try ChildProcess.spawn(executable: configuration.executable, arguments: configuration.arguments, environment: environment)
            } catch {
                logger.critical("cannot start the worker process", metadata: ["error": "\(error)"])
                return 1
            }
            let stopsSoFar = state.withLock { s -> Int in
                s.child = child.pid
                return s.stopRequests
            }
            // A stop that came while the child was being started is passed on now.
            for _ in 0..<stopsSoFar { kill(child.pid, Self.stopSignal) }
            logger.info(
                "worker process started", metadata: StartupClock.metadata.merging(["pid": "\(child.pid)", "restarts": "\(restarts)"]) { $1 })
            let started = ContinuousClock.now
            let tracker = ProcessingTracker(process: child.pid)
            let readerDone = CancellationFlag()
            let pipeEnded = WakeSignal()
            tracker.follow(child.reports) {
                readerDone.cancel()
                pipeEnded.wake()
            }
            let (exit, cause) = await watch(child, tracker, pipeEnded: (pipeEnded, readerDone))
            // The pipe's last lines are read before the jobs in processing are judged.
            _ = await readerDone.sleep(seconds: 2)
            state.withLock { $0.child = nil }
            switch exit {
            case .exited(let status):
                logger.info("worker process exited", metadata: ["pid": "\(child.pid)", "status": "\(status)"])
                return status
            case .signaled(let signal) where signal == Self.stopSignal && cause == nil:
                // Only if its handler was never installed; a stop, not a crash.
                logger.info("worker process stopped before it was ready", metadata: ["pid": "\(child.pid)"])
                return 0
            case .signaled(let signal):
                let reason = cause ?? .signal(signal)
                if case .stopOverrun = reason {
                    await recordCrash(reason, tracker: tracker, pid: child.pid)
                    return 0
                }
                restartCount.add(1, ordering: .relaxed)
                await recordCrash(reason, tracker: tracker, pid: child.pid)
                crashes = ContinuousClock.now - started >= configuration.stableAfter ? 1 : crashes + 1
                let delay = restartBackoff.delay(afterAttempt: crashes)
                logger.notice("restarting the worker process", metadata: ["after": "\(TimeSpan.format(delay))"])
                if await !stopped.sleep(seconds: delay.seconds) { return 0 }
            }
        }
    }

    /// The environment variable that tells a child how many restarts came before it.
    public static let restartsKey = "HALCYON_WORKER_RESTARTS"

    /// The Swift runtime's backtracer settings, and what a child gets when they are unset: the
    /// crashed thread only (the other threads wait in the runtime and say nothing about the crash),
    /// with the images it mentions — far less to symbolicate than every thread of a debug build.
    static let backtraceKey = "SWIFT_BACKTRACE"
    static let backtraceDefault = "threads=crashed,images=mentioned"

    /// How long a crashed child may spend writing its backtrace before it is ended as stuck.
    static let backtraceAllowance: Duration = .seconds(60)

    /// Why the supervisor ended a child, when it did.
    enum Cause: Equatable, Sendable {
        case signal(Int32)
        case memory(resident: Int, limit: Int)
        case stuck([Int64])
        /// Stopped, and still running past its exit deadline; the jobs stuck in one call then.
        case stopOverrun(stuck: [Int64])

        var description: String {
            switch self {
            case .signal(let s): "\(Self.name(of: s))"
            case .memory(let resident, let limit):
                "SIGKILL from the supervisor: \(ByteSize.format(Int64(resident))) resident, over --max-memory \(ByteSize.format(Int64(limit)))"
            case .stuck(let ids):
                "SIGKILL from the supervisor: job \(ids.map(String.init).joined(separator: ", ")) stuck in one call past --max-job-time"
            case .stopOverrun:
                "SIGKILL from the supervisor: still running past --grace and its margin after the stop request"
            }
        }

        static func name(of signal: Int32) -> String {
            let names: [Int32: String] = [
                SIGSEGV: "SIGSEGV", SIGBUS: "SIGBUS", SIGILL: "SIGILL", SIGTRAP: "SIGTRAP", SIGABRT: "SIGABRT", SIGFPE: "SIGFPE",
                SIGKILL: "SIGKILL (the OOM killer, or an operator)", SIGTERM: "SIGTERM", SIGINT: "SIGINT", SIGSYS: "SIGSYS",
            ]
            return names[signal] ?? "signal \(signal)"
        }
    }

    /// Waits for the child to end, ending it at once when it goes over the memory ceiling or a
    /// job has been stuck in processing past the deadline and its grace. Looks every
    /// `watchInterval`, and every millisecond for a moment once the child's report pipe has
    /// ended (its exit closes it just before it can be reaped), so a drained worker's exit is
    /// seen at once, not up to an interval later.
    private func watch(
        _ child: ChildProcess, _ tracker: ProcessingTracker, pipeEnded: (signal: WakeSignal, flag: CancellationFlag)
    ) async -> (ChildProcess.Exit, Cause?) {
        var cause: Cause?
        var backtraceSince: ContinuousClock.Instant?
        var quickLooks = 0, pipeSeenEnded = false
        while true {
            // What the jobs in processing have spent, read while the child lives: if it dies,
            // they are charged up to here (`ProcessingTracker.spent`).
            tracker.sample()
            if let exit = child.exit(block: false) { return (exit, cause) }
            if cause == nil {
                let grace = configuration.stuckGrace ?? min(.seconds(30), configuration.maxJobTime)
                if let by = state.withLock({ $0.exitBy }), ContinuousClock.now >= by {
                    cause = .stopOverrun(stuck: tracker.overdue(deadline: configuration.maxJobTime, grace: .zero))
                } else if let limit = configuration.maxMemory, let resident = child.residentBytes, resident > limit {
                    cause = .memory(resident: resident, limit: limit)
                } else {
                    let stuck = tracker.overdue(deadline: configuration.maxJobTime, grace: grace)
                    // A child that crashed is not stuck while its backtrace is being written
                    // (for a minute at most: the backtracer could hang too).
                    if !stuck.isEmpty, child.isWritingABacktrace {
                        backtraceSince = backtraceSince ?? .now
                    }
                    if !stuck.isEmpty, backtraceSince.map({ .now - $0 >= Self.backtraceAllowance }) ?? true {
                        cause = .stuck(stuck)
                    }
                }
                if let cause {
                    logger.error("ending the worker process", metadata: ["pid": "\(child.pid)", "reason": "\(cause.description)"])
                    tracker.sample()
                    kill(child.pid, SIGKILL)
                }
            }
            if quickLooks > 0 {
                quickLooks -= 1
                try? await Task.sleep(for: .milliseconds(1))
            } else {
                await pipeEnded.signal.wait(timeout: configuration.watchInterval)
                if pipeEnded.flag.isCancelled, !pipeSeenEnded {
                    pipeSeenEnded = true
                    quickLooks = 100
                }
            }
        }
    }

    /// After a child died: the jobs that caused it are charged (`CrashCharges`), the rest
    /// released, the restart counted. When the database cannot be reached within a minute the
    /// leases lapse instead and the rescue takes the jobs.
    private func recordCrash(_ cause: Cause, tracker: ProcessingTracker, pid: pid_t) async {
        let workerID = configuration.workerID, poisonAfter = configuration.poisonAfter, maxJobTime = configuration.maxJobTime
        let inProcessing = tracker.current, holdingBytes = tracker.holding
        // Each charged job's attempt is billed the CPU it spent in processing (`usage`): its
        // share of a decode it was in, its own chain — a stuck job's to the kill, a bystander's
        // own work, never another's.
        let spent = tracker.timings
        let deadline = ContinuousClock.now + .seconds(60)
        let outcome = try? await DatabaseRetry(maximum: .seconds(5)).run(
            "record a crash", logger: logger, giveUpWhen: { ContinuousClock.now >= deadline },
            retryIf: { ($0 as? DatabaseError)?.isTransient == true }
        ) { [conninfo, configuration] () async throws -> (charges: CrashCharges, released: Int) in
            let connection = try await PGConnection.connect(conninfo, label: "supervisor", statementTimeout: configuration.statementTimeout.seconds)
            defer { Task { await connection.close() } }
            let queue = JobQueue(connection: connection)
            let held = try await queue.heldJobs(workerID: workerID)
            let charges = CrashCharges(
                cause: cause, held: held.map { CrashCharges.Held(id: $0.claim.id, crashes: $0.crashes) }, inProcessing: inProcessing,
                holdingBytes: holdingBytes, poisonAfter: poisonAfter, maxJobTime: maxJobTime)
            let claims = Dictionary(held.map { ($0.claim.id, $0.claim) }) { a, _ in a }
            for (id, error) in charges.charged {
                // Retried at once: the process that died may have been brought down by another job.
                if let claim = claims[id] {
                    _ = try await queue.fail(claim, workerID: workerID, error: error, retryDelay: .zero, timings: spent[id] ?? StageTimings())
                }
            }
            let released = try await queue.release(charges.released.compactMap { claims[$0] }, workerID: workerID)
            if case .stopOverrun = cause {} else { try await queue.recordRestart(workerID: workerID, reason: cause.description) }
            return (charges, released)
        }
        if let outcome {
            logger.error(
                "the worker process died",
                metadata: [
                    "pid": "\(pid)", "reason": "\(cause.description)", "charged": "\(outcome.charges.charged.map(\.id))",
                    "failed_for_good": "\(outcome.charges.poisoned)", "released": "\(outcome.released)",
                ])
        } else {
            logger.error(
                "the worker process died; its jobs could not be recorded (their leases will lapse)",
                metadata: [
                    "pid": "\(pid)", "reason": "\(cause.description)", "in_processing": "\(inProcessing.sorted())",
                    "holding": "\(holdingBytes.sorted())",
                ])
        }
    }
}
