import Synchronization

/// Wakes one waiting loop (the claim loop: a notification, a freed slot, a stop request).
/// Wake-ups that arrive while nobody waits are remembered, so none is lost. One waiter at a time.
public final class WakeSignal: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
        var generation = 0
    }
    private let state = Mutex(State())

    public init() {}

    public func wake() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if let w = s.waiter { s.waiter = nil; return w }
            s.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns at the next wake-up, or after `timeout`.
    public func wait(timeout: Duration) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let (resumeNow, gen) = state.withLock { s -> (Bool, Int) in
                if s.pending { s.pending = false; return (true, s.generation) }
                s.generation += 1
                s.waiter = c
                return (false, s.generation)
            }
            if resumeNow { c.resume(); return }
            Task { [self] in
                try? await Task.sleep(for: timeout)
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
