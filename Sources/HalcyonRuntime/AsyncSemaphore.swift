import Synchronization

/// Limits how many tasks run a section at once (download slots, processing slots), FIFO.
/// A waiter can give up: when its job's `CancellationFlag` is raised (shutdown, cancel, lost
/// lease) it leaves the line at once instead of starting work nobody will record.
public final class AsyncSemaphore: Sendable {
    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Bool, Never>
    }
    private struct State {
        var available: Int
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
    }
    private let state: Mutex<State>

    public init(_ permits: Int) {
        state = Mutex(State(available: permits))
    }

    /// Waits for a permit. False (holding nothing) when `cancel` was raised first.
    public func wait(cancel: CancellationFlag? = nil) async -> Bool {
        if cancel?.isCancelled == true { return false }
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1; return s.nextID
        }
        let granted = await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            let now = state.withLock { s -> Bool in
                if s.available > 0 { s.available -= 1; return true }
                s.waiters.append(Waiter(id: id, continuation: c))
                return false
            }
            if now { c.resume(returning: true); return }
            cancel?.onCancel { [self] in
                let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
                    guard let i = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                    return s.waiters.remove(at: i).continuation
                }
                waiter?.resume(returning: false)
            }
        }
        // Granted just as the flag went up: hand the permit on rather than start.
        if granted, cancel?.isCancelled == true {
            signal()
            return false
        }
        return granted
    }

    public func signal() {
        let next = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            if s.waiters.isEmpty { s.available += 1; return nil }
            return s.waiters.removeFirst().continuation
        }
        next?.resume(returning: true)
    }

    /// Runs `body` holding one permit.
    public func withPermit<T>(_ body: () async throws -> T) async rethrows -> T {
        _ = await wait()
        defer { signal() }
        return try await body()
    }
}
