import HalcyonDomain
import HalcyonQueue
import Synchronization

/// Group commit for successes: while one batch of completions is being written, the ones that
/// arrive meanwhile wait and go together in the next statement. No completion waits for a
/// timer — at low rates each is written alone, at high rates a round trip carries many.
///
/// A batch the database refuses for good (a deterministic error: an application's trigger or
/// constraint rejecting one row) is written again row by row, so one bad row fails alone and
/// the rest of its batch is recorded.
final class CompletionBatcher: Sendable {
    typealias Completion = (claim: Claim, result: JobResult, timings: StageTimings)

    private struct Waiting {
        var completion: Completion
        var continuation: CheckedContinuation<Bool, any Error>
    }

    private struct State {
        var waiting: [Waiting] = []
        var writing = false
    }

    private let state = Mutex(State())
    private let write: @Sendable ([Completion]) async throws -> Set<Int64>

    /// `write` records a batch and returns the ids that were still ours.
    init(write: @escaping @Sendable ([Completion]) async throws -> Set<Int64>) {
        self.write = write
    }

    /// Records one success; true when it was still ours, false when it had been cancelled or
    /// rescued meanwhile. Throws the batch's database error (the caller retries).
    func complete(_ completion: Completion) async throws -> Bool {
        try await withCheckedThrowingContinuation { continuation in
            let lead = state.withLock { s -> Bool in
                s.waiting.append(Waiting(completion: completion, continuation: continuation))
                guard !s.writing else { return false }
                s.writing = true
                return true
            }
            if lead { Task { await self.writeUntilEmpty() } }
        }
    }

    private func writeUntilEmpty() async {
        while true {
            let batch = state.withLock { s -> [Waiting] in
                defer { s.waiting = [] }
                if s.waiting.isEmpty { s.writing = false }
                return s.waiting
            }
            guard !batch.isEmpty else { return }
            do {
                let ours = try await write(batch.map(\.completion))
                for w in batch { w.continuation.resume(returning: ours.contains(w.completion.claim.id)) }
            } catch let error as DatabaseError where !error.isTransient && batch.count > 1 {
                for w in batch {
                    do {
                        let ours = try await write([w.completion])
                        w.continuation.resume(returning: ours.contains(w.completion.claim.id))
                    } catch {
                        w.continuation.resume(throwing: error)
                    }
                }
            } catch {
                for w in batch { w.continuation.resume(throwing: error) }
            }
        }
    }
}
