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
        /// Why the store refuses this worker's credentials, while it does.
        var storeRefusal: String?
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

    /// Why the store refuses this worker's credentials, while it does: no job is claimed, and
    /// `/healthz` says so.
    var storeRefusal: String? { state.withLock { $0.storeRefusal } }

    /// Notes the store's refusal (`store.access_denied`); true when it is news.
    func storeRefused(_ message: String) -> Bool {
        defer { wake.wake() }
        return state.withLock { s in
            defer { s.storeRefusal = message }
            return s.storeRefusal == nil
        }
    }

    /// The store accepts the credentials again; true when it had refused them.
    func storeAccepted() -> Bool {
        state.withLock { s in
            defer { s.storeRefusal = nil }
            return s.storeRefusal != nil
        }
    }
}
