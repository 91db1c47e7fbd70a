import Dispatch
import HalcyonFetch
import HalcyonRuntime
import Synchronization

/// The bytes of sources a worker holds in memory — arriving (counted chunk by chunk as they
/// are received) and downloaded, waiting for or in a processing slot — kept under a budget:
/// a transfer starts (in its download slot) only while fewer than `limit` bytes are held, and a
/// transfer under way is held back at its next chunk while more are, unless it is the oldest
/// one under way (which always proceeds, so the bytes that fill the budget are always on their
/// way to being processed and given back). Without it, a worker that claimed many jobs
/// (store-hit claims of 250, or many big sources) would download them all at once, and the
/// memory over `--max-memory` would be spent before any job's decode. The most held is about
/// `limit` plus the oldest transfer and a chunk per other transfer. Waits between retries hold
/// nothing.
final class PendingBytes: DownloadGate {
    let limit: Int
    private struct State {
        var held = 0
        var waiters: [UInt64: CheckedContinuation<Bool, Never>] = [:]
        var nextID: UInt64 = 0
        /// Transfers under way, by the order they were admitted in.
        var transfers: Set<UInt64> = []
        /// Transfers held back at a chunk, woken when bytes are given back.
        var blocked: [UInt64: DispatchSemaphore] = [:]
    }
    private let state = Mutex(State())

    init(limit: Int) { self.limit = max(1, limit) }

    /// Bytes held now (downloaded and arriving).
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

    func meter(cancel: CancellationFlag) -> any EndableTransferMeter {
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            s.transfers.insert(s.nextID)
            return s.nextID
        }
        return Transfer(id: id, gate: self, cancel: cancel)
    }

    /// A job now holds `bytes` of source until `release(_:)`.
    func hold(_ bytes: Int) {
        state.withLock { $0.held += bytes }
    }

    /// `bytes` are no longer held (the job's processing ended); if that makes room, the waiting
    /// transfers go on.
    func release(_ bytes: Int) {
        wake(
            state.withLock { s in
                s.held -= bytes
                return takeWoken(&s)
            })
    }

    // MARK: Transfers

    /// One transfer's meter: what it counted is given back when it ends (the job that keeps
    /// the body holds it again, `hold(_:)`).
    private final class Transfer: EndableTransferMeter {
        let id: UInt64
        let gate: PendingBytes
        let cancel: CancellationFlag
        private let counted = Mutex(0)

        init(id: UInt64, gate: PendingBytes, cancel: CancellationFlag) {
            self.id = id
            self.gate = gate
            self.cancel = cancel
        }

        func received(_ bytes: Int) -> Bool {
            counted.withLock { $0 += bytes }
            return gate.received(bytes, by: id, cancel: cancel)
        }

        func end() {
            gate.ended(
                id,
                counted: counted.withLock { n in
                    defer { n = 0 }
                    return n
                })
        }
    }

    /// Counts `bytes` more for transfer `id`, then holds it back while more than `limit` bytes
    /// are held and an older transfer is under way. Called on the transfer's blocking thread.
    fileprivate func received(_ bytes: Int, by id: UInt64, cancel: CancellationFlag) -> Bool {
        state.withLock { $0.held += bytes }
        while !cancel.isCancelled {
            let semaphore = state.withLock { s -> DispatchSemaphore? in
                guard s.held > limit, let oldest = s.transfers.min(), oldest != id else { return nil }
                let semaphore = DispatchSemaphore(value: 0)
                s.blocked[id] = semaphore
                return semaphore
            }
            guard let semaphore else { return true }
            // Woken when bytes are given back; the timeout only re-reads `cancel`.
            _ = semaphore.wait(timeout: .now() + .milliseconds(250))
            state.withLock { _ = $0.blocked.removeValue(forKey: id) }
        }
        return false
    }

    fileprivate func ended(_ id: UInt64, counted: Int) {
        wake(
            state.withLock { s in
                s.held -= counted
                s.transfers.remove(id)
                return takeWoken(&s)
            })
    }

    private typealias Woken = (admitted: [CheckedContinuation<Bool, Never>], blocked: [DispatchSemaphore])

    /// Everyone to wake after bytes were given back (or the oldest transfer changed).
    private func takeWoken(_ s: inout State) -> Woken {
        let blocked = Array(s.blocked.values)
        guard s.held < limit else { return ([], blocked) }
        defer { s.waiters = [:] }
        return (Array(s.waiters.values), blocked)
    }

    private func wake(_ woken: Woken) {
        woken.blocked.forEach { $0.signal() }
        woken.admitted.forEach { $0.resume(returning: true) }
    }
}
