import Dispatch
import Synchronization

/// A deadline by which a process that was told to stop must have stopped: armed at a stop
/// request, re-armed (earlier) at a second one, and when it passes, `overrun` runs on a thread
/// of its own — however the process's tasks are stuck (a C call that never returns, a server
/// that stopped answering), the timer is not one of them.
public final class ExitDeadline: Sendable {
    private let queue = DispatchQueue(label: "halcyon.exit-deadline")
    private let armed = Mutex<(generation: Int, at: ContinuousClock.Instant?)>((0, nil))
    private let overrun: @Sendable (_ waited: Duration) -> Void

    /// `overrun` is called once the armed deadline passes, with how long it was armed for.
    public init(overrun: @escaping @Sendable (_ waited: Duration) -> Void) {
        self.overrun = overrun
    }

    /// Arms the deadline `after` from now, unless an earlier one is armed already.
    public func arm(after: Duration) {
        let at = ContinuousClock.now + after
        let generation = armed.withLock { state -> Int? in
            if let current = state.at, current <= at { return nil }
            state.generation += 1
            state.at = at
            return state.generation
        }
        guard let generation else { return }
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(max(0, after.nanoseconds)))) { [self] in
            guard armed.withLock({ $0.generation == generation }) else { return }
            overrun(after)
        }
    }
}
