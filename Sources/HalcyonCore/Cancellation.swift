import Synchronization

/// A flag a job's owner raises to abandon it (cancelled row, lost lease, shutdown). Blocking
/// stages poll it (the download's progress callback aborts the transfer); async waiters
/// register handlers that run once, when it is raised.
public final class CancellationFlag: Sendable {
    private struct State {
        var cancelled = false
        var handlers: [@Sendable () -> Void] = []
    }
    private let state = Mutex(State())

    public init() {}

    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    public func cancel() {
        let handlers = state.withLock { s -> [@Sendable () -> Void] in
            guard !s.cancelled else { return [] }
            s.cancelled = true
            defer { s.handlers = [] }
            return s.handlers
        }
        handlers.forEach { $0() }
    }

    /// Runs `handler` when the flag is raised — at once if it already is.
    public func onCancel(_ handler: @escaping @Sendable () -> Void) {
        let now = state.withLock { s -> Bool in
            if s.cancelled { return true }
            s.handlers.append(handler)
            return false
        }
        if now { handler() }
    }
}
