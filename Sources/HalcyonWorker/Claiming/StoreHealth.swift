import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonStore
import Logging
import Synchronization

/// Why a worker's store cannot take its results now (`WorkerState.storePause`): the worker's
/// condition, not a job's. While it lasts no job is claimed, the jobs it catches go back to
/// `queued` with their attempt unspent, and `/healthz` answers 503 with `description`.
struct StorePause: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        /// The store refuses this worker's credentials (`store.access_denied`, confirmed by a probe).
        case credentials
        /// The store refuses writes (`store.not_writable`: no space, a quota, read-only, permissions;
        /// a bucket refusing a probe's write).
        case notWritable
        /// The store's filesystem has less free space than `--store-min-free`.
        case lowSpace
    }

    var kind: Kind
    /// What the store or the free space said.
    var reason: String
    /// Free bytes the store's filesystem must have before claiming resumes: the largest write
    /// refused since the pause began, and at least the minimum free space (0 for a bucket).
    var neededBytes: Int64
    /// The store's filesystem when it was last read (nil for a bucket).
    var space: StoreSpace?

    /// What `/healthz` and the logs say.
    var description: String {
        let free = space.map { " (\(ByteSize.format($0.freeBytes)) free of \(ByteSize.format($0.totalBytes)))" } ?? ""
        switch kind {
        case .credentials: return "the store refuses this worker's credentials: \(reason); claiming paused"
        case .notWritable: return "the store cannot take writes: \(reason)\(free); claiming paused"
        case .lowSpace: return "the store is low on space: \(reason); claiming paused"
        }
    }
}

/// Whether the store can take this worker's results, in one place for both stores and every
/// reason it may not (wrong credentials, a bucket refusing writes, a full disk or quota, a
/// read-only or unwritable directory, free space under `--store-min-free`):
///
/// - `judge` turns a refused write into what is recorded: the worker's condition (the job released
///   unspent, claiming paused), or the job's own failure (`store.result_too_large` for a result
///   larger than the store's whole filesystem or its size limit; `store.write_failed` for a write a
///   probe shows the store would otherwise take).
/// - `checkSpace`, before claims, pauses while the filesystem is under the minimum free space.
/// - `waitUntilWritable` probes while paused, with backoff, and resumes once the store takes a
///   probe's write (and has the free space wanted).
/// - A pause asks for a sweep at once (`sweepDue`) when a size limit is set: its trim makes room.
///
/// The pause itself is kept in `WorkerState` (what the services share, and `/healthz` reads).
final class StoreHealth: Sendable {
    let store: any ResultStore
    let state: WorkerState
    let metrics: Metrics
    let logger: Logger
    /// `--store-min-free` (0: off).
    let minFree: Int64
    /// `--store-size-limit`.
    let sizeLimit: Int64?
    /// Raised when a pause wants a sweep now (the `StoreSweeper` waits on it between sweeps).
    let sweepDue = WakeSignal()
    /// When the free space was last read by `checkSpace`.
    private let lastCheck = Mutex<ContinuousClock.Instant?>(nil)
    /// A sweep freed space while paused: the next probe is due now.
    private let probeNow = Mutex(false)

    /// How often `checkSpace` reads the filesystem, and how often a paused disk store is looked at.
    static let spaceCheckInterval: Duration = .seconds(1)
    /// The waits between probes of a paused bucket: 1 s, doubling, at most 30 s, jittered.
    static let pauseBackoff = Backoff(base: .seconds(1), maximum: .seconds(30), jitter: WorkerConfiguration.retryJitter)

    init(store: any ResultStore, configuration: WorkerConfiguration, state: WorkerState, metrics: Metrics, logger: Logger) {
        self.store = store
        self.state = state
        self.metrics = metrics
        self.logger = logger
        minFree = Int64(configuration.storeMinFree)
        sizeLimit = configuration.storeSizeLimit
    }

    /// The free space below which claiming pauses on a filesystem of `totalBytes`: `--store-min-free`,
    /// at most a twentieth of the filesystem (a small store is not paused by a default sized for
    /// large disks).
    static func minimumFree(_ minFree: Int64, totalBytes: Int64) -> Int64 {
        min(minFree, totalBytes / 20)
    }

    var isPaused: Bool { state.storePause != nil }

    // MARK: A job's write

    /// The error a job gets before its result is written, when it can never be stored: larger
    /// than the store's size limit (`store.result_too_large`).
    func refusal(forResultOf bytes: Int) -> HalcyonError? {
        guard let sizeLimit, Int64(bytes) > sizeLimit else { return nil }
        return HalcyonError(
            .resultTooLarge,
            "the result is \(ByteSize.format(Int64(bytes))), larger than the store's size limit of \(ByteSize.format(sizeLimit)) (--store-size-limit)",
            permanent: true)
    }

    /// What a job whose write of `bytes` failed with `error` records: `store.not_writable`, and
    /// `store.access_denied` once a probe confirms it, pause claiming and are released unspent (the
    /// recorder does that); a result larger than the whole filesystem fails alone
    /// (`store.result_too_large`); a bucket's refusal that a probe's write does not confirm is
    /// the job's own `store.write_failed`.
    func judge(_ error: HalcyonError, bytes: Int) async -> HalcyonError {
        switch error.code {
        case .notWritable:
            let space = await store.space()
            if let space, Int64(bytes) > space.totalBytes {
                return HalcyonError(
                    .resultTooLarge,
                    "the result is \(ByteSize.format(Int64(bytes))), larger than the store's whole filesystem (\(ByteSize.format(space.totalBytes)))",
                    permanent: true)
            }
            pause(.notWritable, error.message, neededBytes: Int64(bytes), space: space)
            return error
        case .accessDenied:
            if isPaused { return error }
            switch await probe() {
            case .refused(let refusal) where refusal.code == .accessDenied || refusal.code == .notWritable:
                pause(Self.kind(of: refusal), refusal.message, neededBytes: 0, space: nil)
                return error
            case .refused, .short, .writable:
                return HalcyonError(.writeFailed, "\(error.message) (the store itself answers: this write alone was refused)")
            }
        default:
            return error
        }
    }

    /// A job came back with the store's condition (`store.not_writable`, `store.access_denied`)
    /// from a path `judge` did not see: the worker pauses as if it had.
    func noteRefused(_ error: HalcyonError) {
        guard !isPaused else { return }
        pause(Self.kind(of: error), error.message, neededBytes: 0, space: nil)
    }

    // MARK: Claiming

    /// Before a claim: reads the store's free space (at most once per `spaceCheckInterval`),
    /// exports it, and pauses while it is under the minimum free space.
    func checkSpace() async {
        let now = ContinuousClock.now
        let due = lastCheck.withLock { last -> Bool in
            if let last, now - last < Self.spaceCheckInterval { return false }
            last = now
            return true
        }
        guard due, let space = await store.space() else { return }
        metrics.storeSpace(space)
        let minimum = Self.minimumFree(minFree, totalBytes: space.totalBytes)
        if space.freeBytes < minimum {
            let reason =
                "\(ByteSize.format(space.freeBytes)) free of \(ByteSize.format(space.totalBytes)), under the \(ByteSize.format(minimum)) --store-min-free asks for"
            pause(.lowSpace, reason, neededBytes: minimum, space: space)
        }
    }

    /// While paused: no claims; the store is probed — a disk store every second, a bucket with
    /// `pauseBackoff` — until it takes a probe's write with the free space wanted, or the worker
    /// stops. A stop request, or a sweep that freed space (`swept`), ends a wait at once; other
    /// wake-ups of the claim loop (notifications, freed slots) do not bring a probe forward.
    func waitUntilWritable() async {
        var attempt = 0
        let local = await store.space() != nil
        while let pause = state.storePause, state.stopRequests == 0 {
            attempt += 1
            let deadline = ContinuousClock.now + (local ? Self.spaceCheckInterval : Self.pauseBackoff.delay(afterAttempt: attempt))
            while ContinuousClock.now < deadline, state.stopRequests == 0, !probeNow.withLock({ $0 }) {
                await state.wake.wait(timeout: deadline - ContinuousClock.now)
            }
            probeNow.withLock { $0 = false }
            guard state.stopRequests == 0 else { return }
            let outcome = await probe(needing: pause.neededBytes)
            var reason: String
            switch outcome {
            case .writable:
                resume(pause)
                return
            case .short(let space, let wanted):
                state.updateStorePause { $0.space = space }
                reason = "\(ByteSize.format(space.freeBytes)) free, \(ByteSize.format(wanted)) wanted"
            case .refused(let error):
                // The credentials accepted again, but not a write (or the other way round): say which.
                let kind = Self.kind(of: error)
                if kind != pause.kind, pause.kind != .lowSpace || kind == .credentials {
                    state.updateStorePause {
                        $0.kind = kind; $0.reason = error.message
                    }
                }
                reason = "\(error)"
            }
            // A bucket's every probe; a disk store's at 1, 2, 4, 8 … s, then every 64 s.
            if !local || attempt & (attempt - 1) == 0 || attempt % 64 == 0 {
                logger.warning("the store still cannot take this worker's results", metadata: ["reason": "\(reason)", "checks": "\(attempt)"])
            }
        }
    }

    /// A sweep finished: the free space is exported, and a paused claimer looks again now.
    func swept(freedBytes: Int64) async {
        if let space = await store.space() { metrics.storeSpace(space) }
        if freedBytes > 0, isPaused {
            probeNow.withLock { $0 = true }
            state.wake.wake()
        }
    }

    // MARK: Probing

    private enum Probe {
        case writable
        /// The filesystem has fewer free bytes than wanted.
        case short(StoreSpace, wanted: Int64)
        /// The store refused access or the probe's write.
        case refused(HalcyonError)
    }

    /// Whether the store takes writes now: it lets this worker in (`checkAccess`), its filesystem
    /// has `needing` bytes free (and the minimum), and a probe's write succeeds (a bucket's
    /// refusal of that write is `store.not_writable`: the credentials were just accepted).
    private func probe(needing: Int64 = 0) async -> Probe {
        do throws(HalcyonError) {
            try await store.checkAccess()
        } catch {
            return .refused(error)
        }
        if let space = await store.space() {
            metrics.storeSpace(space)
            let wanted = max(needing, Self.minimumFree(minFree, totalBytes: space.totalBytes))
            if space.freeBytes < wanted { return .short(space, wanted: wanted) }
        }
        do throws(HalcyonError) {
            try await store.probeWrite()
        } catch {
            return .refused(error.code == .accessDenied ? HalcyonError(.notWritable, "a probe's write was refused: \(error.message)") : error)
        }
        return .writable
    }

    private static func kind(of error: HalcyonError) -> StorePause.Kind {
        error.code == .accessDenied ? .credentials : .notWritable
    }

    /// Pauses claiming (or, already paused, raises the free space wanted); news is logged, the
    /// metric set and, with a size limit, a sweep asked for at once.
    private func pause(_ kind: StorePause.Kind, _ reason: String, neededBytes: Int64, space: StoreSpace?) {
        let pause = StorePause(kind: kind, reason: reason, neededBytes: neededBytes, space: space)
        guard state.storePaused(pause) else { return }
        metrics.storeAvailable(false)
        logger.error(
            "\(pause.description): jobs are released without spending an attempt and none is claimed until the store takes writes again",
            metadata: ["store": "\(store.location)"])
        if sizeLimit != nil { sweepDue.wake() }
    }

    private func resume(_ pause: StorePause) {
        guard state.storeResumed() != nil else { return }
        metrics.storeAvailable(true)
        switch pause.kind {
        case .credentials: logger.notice("the store accepts this worker's credentials again; claiming again")
        case .notWritable, .lowSpace: logger.notice("the store takes writes again; claiming again", metadata: ["store": "\(store.location)"])
        }
    }
}
