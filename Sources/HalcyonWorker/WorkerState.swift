import HalcyonQueue
import HalcyonRuntime
import Synchronization

/// What a worker did before it stopped.
public struct WorkerSummary: Sendable {
    public var succeeded = 0
    public var failed = 0
    public var retried = 0
    public var released = 0
    public var rescued = 0
}

/// What a worker's services share: the jobs it holds, its stop requests, its totals. Each
/// service owns its own loop; this is the only state they have in common.
final class WorkerState: Sendable {
    private struct State {
        var stopRequests = 0
        var held = HeldJobs()
        var summary = WorkerSummary()
        /// Counters not yet written to `halcyon.workers`.
        var unreportedDone = 0
        var unreportedFailed = 0
        /// Exponential average of recent outcomes being store hits (1) or anything else (0).
        var recentHits = 0.0
        /// Why the store cannot take this worker's results, while it cannot (`StoreHealth`).
        var storePause: StorePause?
    }

    private let state = Mutex(State())
    /// Wakes the claim loop: a notification, a freed slot, a stop request.
    let wake = WakeSignal()
    /// Wakes the webhook deliverer: a job with a `callback_url` finished here.
    let webhooksDue = WakeSignal()
    /// Told how many jobs are held after every change.
    private let metrics: Metrics

    init(metrics: Metrics) {
        self.metrics = metrics
    }

    /// Counts a stop request and returns how many there have been.
    func requestStop() -> Int {
        defer { wake.wake() }
        return state.withLock { s in
            s.stopRequests += 1
            return s.stopRequests
        }
    }

    var stopRequests: Int { state.withLock { $0.stopRequests } }

    /// Runs `body` on the jobs held, under the lock.
    func withHeld<T>(_ body: (inout HeldJobs) -> T) -> T {
        let (result, count) = state.withLock { s in (body(&s.held), s.held.count) }
        metrics.jobsInFlight(count)
        return result
    }

    var summary: WorkerSummary { state.withLock { $0.summary } }

    func updateSummary(_ body: (inout WorkerSummary) -> Void) {
        state.withLock { body(&$0.summary) }
    }

    /// Counts a recorded outcome for the next worker heartbeat.
    func unreported(done: Int = 0, failed: Int = 0) {
        state.withLock { s in
            s.unreportedDone += done
            s.unreportedFailed += failed
        }
    }

    /// The outcomes not yet reported, now taken.
    func takeUnreported() -> (done: Int, failed: Int) {
        state.withLock { s in
            defer { s.unreportedDone = 0; s.unreportedFailed = 0 }
            return (s.unreportedDone, s.unreportedFailed)
        }
    }

    /// Notes whether an outcome was a store hit (an exponential average over about ten jobs).
    func noteOutcome(hit: Bool) {
        state.withLock { s in s.recentHits = 0.9 * s.recentHits + (hit ? 0.1 : 0) }
    }

    var recentHits: Double { state.withLock { $0.recentHits } }

    /// Why the store cannot take this worker's results, while it cannot: no job is claimed, and
    /// `/healthz` says so (`StoreHealth` decides).
    var storePause: StorePause? { state.withLock { $0.storePause } }

    /// Notes a pause (the claim loop is woken); true when it is news. Already paused, the free
    /// space wanted is raised to this pause's if larger, and the rest kept.
    func storePaused(_ pause: StorePause) -> Bool {
        defer { wake.wake() }
        return state.withLock { s in
            guard var current = s.storePause else {
                s.storePause = pause
                return true
            }
            current.neededBytes = max(current.neededBytes, pause.neededBytes)
            if let space = pause.space { current.space = space }
            s.storePause = current
            return false
        }
    }

    /// Changes the pause in place, while there is one.
    func updateStorePause(_ body: (inout StorePause) -> Void) {
        state.withLock { s in
            if var pause = s.storePause {
                body(&pause)
                s.storePause = pause
            }
        }
    }

    /// The store takes writes again; the pause that ended, if there was one.
    func storeResumed() -> StorePause? {
        state.withLock { s in
            defer { s.storePause = nil }
            return s.storePause
        }
    }
}
