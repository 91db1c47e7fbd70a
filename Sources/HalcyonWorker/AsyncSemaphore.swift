import Synchronization

/// Limits how many tasks run a section at once (download slots, processing slots), FIFO.
final class AsyncSemaphore: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state: Mutex<State>

    init(_ permits: Int) {
        state = Mutex(State(available: permits))
    }

    func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { s -> Bool in
                if s.available > 0 { s.available -= 1; return true }
                s.waiters.append(c)
                return false
            }
            if resumeNow { c.resume() }
        }
    }

    func signal() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if s.waiters.isEmpty { s.available += 1; return nil }
            return s.waiters.removeFirst()
        }
        next?.resume()
    }

    /// Runs `body` holding one permit.
    func withPermit<T>(_ body: () async throws -> T) async rethrows -> T {
        await wait()
        defer { signal() }
        return try await body()
    }
}

/// Wakes the claim loop: a notification, a freed slot, a stop request. Wake-ups that arrive
/// while nobody waits are remembered, so none is lost.
final class WakeSignal: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
        var generation = 0
    }
    private let state = Mutex(State())

    func wake() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if let w = s.waiter { s.waiter = nil; return w }
            s.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns at the next wake-up, or after `timeout` seconds.
    func wait(timeout: Double) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let (resumeNow, gen) = state.withLock { s -> (Bool, Int) in
                if s.pending { s.pending = false; return (true, s.generation) }
                s.generation += 1
                s.waiter = c
                return (false, s.generation)
            }
            if resumeNow { c.resume(); return }
            Task { [self] in
                try? await Task.sleep(for: .seconds(timeout))
                let w = state.withLock { s -> CheckedContinuation<Void, Never>? in
                    guard s.generation == gen, let w = s.waiter else { return nil }
                    s.waiter = nil
                    return w
                }
                w?.resume()
            }
        }
    }
}
