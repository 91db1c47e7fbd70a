import Synchronization

/// Limits how many tasks run a section at once (download slots, processing slots). Waiters
/// name a lane (a queue's fair key, say): the lanes with waiters take turns, one permit each,
/// and within a lane waiters go first come, first served — so a lane that arrives behind
/// another's long line waits one turn, not the whole line. Without lanes (every waiter in the
/// same one) it is FIFO. A waiter can give up: when its job's `CancellationFlag` is raised
/// (shutdown, cancel, lost lease) it leaves the line at once instead of starting work nobody
/// will record.
public final class AsyncSemaphore: Sendable {
    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Bool, Never>
    }
    private struct State {
        var available: Int
        /// Each lane's waiters, first come first.
        var lanes: [String: [Waiter]] = [:]
        /// The lanes with waiters, in turn order: the first is served next, then goes to the back.
        var turns: [String] = []
        var nextID: UInt64 = 0

        mutating func next() -> CheckedContinuation<Bool, Never>? {
            guard let lane = turns.first, var line = lanes[lane], !line.isEmpty else { return nil }
            let waiter = line.removeFirst()
            turns.removeFirst()
            if line.isEmpty {
                lanes[lane] = nil
            } else {
                lanes[lane] = line
                turns.append(lane)
            }
            return waiter.continuation
        }

        mutating func remove(id: UInt64, lane: String) -> CheckedContinuation<Bool, Never>? {
            guard var line = lanes[lane], let i = line.firstIndex(where: { $0.id == id }) else { return nil }
            let waiter = line.remove(at: i)
            if line.isEmpty {
                lanes[lane] = nil
                turns.removeAll { $0 == lane }
            } else {
                lanes[lane] = line
            }
            return waiter.continuation
        }
    }
    private let state: Mutex<State>

    public init(_ permits: Int) {
        state = Mutex(State(available: permits))
    }

    /// How many wait for a permit now, in every lane.
    public var waiting: Int { state.withLock { $0.lanes.values.reduce(0) { $0 + $1.count } } }

    /// Waits for a permit in `lane`'s line. False (holding nothing) when `cancel` was raised first.
    public func wait(cancel: CancellationFlag? = nil, lane: String = "") async -> Bool {
        if cancel?.isCancelled == true { return false }
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1; return s.nextID
        }
        let granted = await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            let now = state.withLock { s -> Bool in
                if s.available > 0 { s.available -= 1; return true }
                if s.lanes[lane] == nil { s.turns.append(lane) }
                s.lanes[lane, default: []].append(Waiter(id: id, continuation: c))
                return false
            }
            if now { c.resume(returning: true); return }
            cancel?.onCancel { [self] in
                state.withLock { $0.remove(id: id, lane: lane) }?.resume(returning: false)
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
            guard let next = s.next() else {
                s.available += 1
                return nil
            }
            return next
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
