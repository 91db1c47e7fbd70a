import Synchronization

/// A flag a job's owner raises to abandon it (cancelled row, lost lease, shutdown). Blocking
/// stages poll it (the download's progress callback aborts the transfer, the image pipeline
/// checks it between steps); async waiters register handlers that run once, when it is raised.
public final class CancellationFlag: Sendable {
    private struct State {
        var cancelled = false
        var reason: (any Error & Sendable)?
        var handlers: [@Sendable () -> Void] = []
        /// A deadline past which the next look at the flag raises it (`deadline(_:because:parent:)`).
        var deadline: ContinuousClock.Instant?
        var deadlineReason: (any Error & Sendable)?
    }
    private let state = Mutex(State())

    public init() {}

    public var isCancelled: Bool { look() }

    /// Why the flag was raised, when whoever raised it said (kept from the first raise only) —
    /// e.g. a deadline that makes the work a failure rather than abandoned. The domain's
    /// `check()` throws it.
    public var reason: (any Error & Sendable)? {
        look()
        return state.withLock { $0.reason }
    }

    /// Handlers waiting for the flag (for tests: what a long-lived flag keeps).
    package var handlerCount: Int { state.withLock { $0.handlers.count } }

    /// Whether the flag is raised, raising it first (with the deadline's reason) when its
    /// deadline has passed.
    @discardableResult
    private func look() -> Bool {
        let (cancelled, due) = state.withLock { s -> (Bool, (any Error & Sendable)??) in
            if s.cancelled { return (true, nil) }
            guard let deadline = s.deadline, ContinuousClock.now >= deadline else { return (false, nil) }
            return (false, .some(s.deadlineReason))
        }
        if let due { cancel(because: due) }
        return cancelled || due != nil
    }

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
        look()
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

    /// A flag raised when `parent` is (with its reason, nil: never), by itself, or by the first
    /// look at it (`isCancelled`, `reason`) once `deadline` has passed, `because` then — for
    /// work that polls its flag (the image pipeline's steps and row loops). No timer stands
    /// behind the deadline: nothing is left scheduled when the work ends early, which a timer per
    /// deadline was (a libdispatch timer and its closures, kept until it fired, for every job:
    /// the image process grew by about a kilobyte per job for `--max-job-time`). Handlers
    /// registered on the flag run when it is raised, which for the deadline is when it is
    /// looked at.
    public static func deadline(
        _ deadline: ContinuousClock.Instant, because reason: any Error & Sendable, parent: CancellationFlag? = nil
    ) -> CancellationFlag {
        let flag = parent?.child() ?? CancellationFlag()
        flag.state.withLock { s in
            s.deadline = deadline
            s.deadlineReason = reason
        }
        return flag
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
