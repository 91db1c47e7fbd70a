import Synchronization

/// A flag a job's owner raises to abandon it (cancelled row, lost lease, shutdown). Blocking
/// stages poll it (the download's progress callback aborts the transfer, the image pipeline
/// checks it between steps); async waiters register handlers that run once, when it is raised.
public final class CancellationFlag: Sendable {
    private struct State {
        var cancelled = false
        var reason: (any Error & Sendable)?
        var handlers: [@Sendable () -> Void] = []
    }
    private let state = Mutex(State())

    public init() {}

    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Why the flag was raised, when whoever raised it said (kept from the first raise only) —
    /// e.g. a deadline that makes the work a failure rather than abandoned. The domain's
    /// `check()` throws it.
    public var reason: (any Error & Sendable)? { state.withLock { $0.reason } }

    /// Raises the flag, saying why when there is more to say than "no longer wanted".
    public func cancel(because reason: (any Error & Sendable)? = nil) {
        let handlers = state.withLock { s -> [@Sendable () -> Void] in
            guard !s.cancelled else { return [] }
            s.cancelled = true
            s.reason = reason
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

    /// A flag raised when this one is (with its reason), or by itself — for a stage with a
    /// limit of its own. Handlers run on the child only.
    public func child() -> CancellationFlag {
        let child = CancellationFlag()
        onCancel { [weak child, unowned self] in child?.cancel(because: self.reason) }
        return child
    }

    /// Sleeps for `seconds`, or less if the flag is raised meanwhile; true when it slept the
    /// whole time.
    public func sleep(seconds: Double) async -> Bool {
        guard !isCancelled else { return false }
        guard seconds > 0 else { return true }
        _ = await withCheckedContinuation { (c: CheckedContinuation<Void?, Never>) in
            let once = FirstResult(c)
            let timer = Task {
                try? await Task.sleep(for: .seconds(min(seconds, 1e9)))
                once.resume(())
            }
            onCancel {
                timer.cancel()
                once.resume(())
            }
        }
        return !isCancelled
    }
}

/// Runs `body` and returns its result, or nil once `seconds` pass first. The body is not
/// stopped (a blocking C call cannot be); its result is dropped. For bookkeeping a stopping
/// process may skip when the database does not answer.
public func withTimeLimit<T: Sendable>(_ seconds: Double, _ body: @escaping @Sendable () async throws -> T) async -> T? {
    await withCheckedContinuation { (c: CheckedContinuation<T?, Never>) in
        let once = FirstResult(c)
        let work = Task { once.resume(try? await body()) }
        Task {
            try? await Task.sleep(for: .seconds(min(seconds, 1e9)))
            once.resume(nil)
            work.cancel()
        }
    }
}

/// Resumes a continuation with the first value given; later ones are dropped.
private final class FirstResult<T: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<T?, Never>?>
    init(_ c: CheckedContinuation<T?, Never>) { continuation = Mutex(c) }
    func resume(_ value: T?) {
        continuation.withLock { c -> CheckedContinuation<T?, Never>? in
            defer { c = nil }; return c
        }?.resume(returning: value)
    }
}
