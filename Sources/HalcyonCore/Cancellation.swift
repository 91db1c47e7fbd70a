import Synchronization

/// A flag a job's owner raises to abandon it (cancelled row, lost lease, shutdown). Blocking
/// stages poll it: the download's progress callback aborts the transfer when it is set.
public final class CancellationFlag: Sendable {
    private let flag = Atomic<Bool>(false)

    public init() {}

    public var isCancelled: Bool { flag.load(ordering: .relaxed) }

    public func cancel() { flag.store(true, ordering: .relaxed) }
}
