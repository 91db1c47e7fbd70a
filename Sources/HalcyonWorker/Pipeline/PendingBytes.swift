import HalcyonFetch
import HalcyonRuntime
import Synchronization

/// The bytes of downloaded sources a worker holds for jobs waiting for (or in) a processing
/// slot, kept under a budget: a transfer starts (in its download slot) only while fewer than
/// `limit` bytes are held. Without it, a worker that claimed many jobs (store-hit claims of 250,
/// or many big sources) would download them all and keep every body in memory until a slot came
/// free. The most held is `limit` plus what the transfers running when it filled bring: the
/// download slots × the download size limit. Waits between retries hold nothing.
final class PendingBytes: DownloadGate {
    let limit: Int
    private struct State {
        var held = 0
        var waiters: [UInt64: CheckedContinuation<Bool, Never>] = [:]
        var nextID: UInt64 = 0
    }
    private let state = Mutex(State())

    init(limit: Int) { self.limit = max(1, limit) }

    /// Bytes held now.
    var held: Int { state.withLock { $0.held } }

    /// Returns true once fewer than `limit` bytes are held, false when `cancel` is raised first.
    func admit(cancel: CancellationFlag) async -> Bool {
        if cancel.isCancelled { return false }
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1; return s.nextID
        }
        return await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            let now = state.withLock { s -> Bool in
                if s.held < limit { return true }
                s.waiters[id] = c
                return false
            }
            if now { c.resume(returning: true); return }
            cancel.onCancel { [self] in
                state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(returning: false)
            }
        }
    }

    /// A job now holds `bytes` of source until `release(_:)`.
    func hold(_ bytes: Int) {
        state.withLock { $0.held += bytes }
    }

    /// `bytes` are no longer held (the job's processing ended); if that makes room, the waiting
    /// transfers start (each in its own download slot).
    func release(_ bytes: Int) {
        let ready = state.withLock { s -> [CheckedContinuation<Bool, Never>] in
            s.held -= bytes
            guard s.held < limit else { return [] }
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        ready.forEach { $0.resume(returning: true) }
    }
}
