import HalcyonRuntime

/// What cancellation means for a job's work: a raised flag ends it with the flag's reason when
/// that is a `HalcyonError` (a deadline: `image.too_costly`), else as `job.cancelled` — the
/// work is no longer wanted (shutdown, an operator's cancel, a lost lease).
extension CancellationFlag {
    /// Throws when the flag is raised: its reason, else `HalcyonError.abandoned`.
    public func check() throws(HalcyonError) {
        guard isCancelled else { return }
        throw (reason as? HalcyonError) ?? HalcyonError.abandoned
    }
}

extension AsyncSemaphore {
    /// Runs `body` holding one permit (waiting in `lane`'s line), or throws
    /// `HalcyonError.abandoned` without running it when `cancel` is raised while waiting.
    public func withPermit<T>(cancel: CancellationFlag, lane: String = "", _ body: () async throws -> T) async throws -> T {
        guard await wait(cancel: cancel, lane: lane) else { throw HalcyonError.abandoned }
        defer { signal() }
        return try await body()
    }
}
