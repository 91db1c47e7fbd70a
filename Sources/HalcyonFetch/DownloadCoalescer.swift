import Foundation
import HalcyonDomain
import HalcyonRuntime
import Synchronization

/// Concurrent requests for the same key share one download (Kingfisher's `ImageDownloader`
/// task table). Each waiter can detach — its job was cancelled — without disturbing the
/// others; the download itself is cancelled only when its last waiter has gone.
final class DownloadCoalescer<Value: Sendable>: Sendable {
    typealias Outcome = Result<Value, HalcyonError>

    private struct Entry {
        let generation: UUID
        let cancel: CancellationFlag
        var waiters: [UUID: CheckedContinuation<Outcome, Never>]
    }
    private let table = Mutex<[String: Entry]>([:])

    /// How many downloads are in flight (for tests and metrics).
    var inFlight: Int { table.withLock { $0.count } }

    /// Joins the download for `key`, starting it with `start` when none runs.
    func value(
        for key: String, cancel: CancellationFlag,
        start: @escaping @Sendable (CancellationFlag) async -> Outcome
    ) async -> Outcome {
        let waiter = UUID()
        return await withCheckedContinuation { (c: CheckedContinuation<Outcome, Never>) in
            let newDownload = table.withLock { t -> (UUID, CancellationFlag)? in
                if t[key] != nil {
                    t[key]!.waiters[waiter] = c
                    return nil
                }
                let entry = Entry(generation: UUID(), cancel: CancellationFlag(), waiters: [waiter: c])
                t[key] = entry
                return (entry.generation, entry.cancel)
            }
            if let (generation, flag) = newDownload {
                Task {
                    let outcome = await start(flag)
                    self.finish(key, generation: generation, with: outcome)
                }
            }
            cancel.onCancel { self.detach(key, waiter: waiter) }
        }
    }

    private func finish(_ key: String, generation: UUID, with outcome: Outcome) {
        let waiters = table.withLock { t -> [CheckedContinuation<Outcome, Never>] in
            guard let entry = t[key], entry.generation == generation else { return [] }
            t[key] = nil
            return Array(entry.waiters.values)
        }
        waiters.forEach { $0.resume(returning: outcome) }
    }

    private func detach(_ key: String, waiter: UUID) {
        let (continuation, abandoned) = table.withLock { t -> (CheckedContinuation<Outcome, Never>?, CancellationFlag?) in
            guard var entry = t[key], let c = entry.waiters.removeValue(forKey: waiter) else { return (nil, nil) }
            if entry.waiters.isEmpty {
                // Nobody wants it any more: stop it, and let a later request start afresh.
                t[key] = nil
                return (c, entry.cancel)
            }
            t[key] = entry
            return (c, nil)
        }
        continuation?.resume(returning: .failure(HalcyonError(.cancelled, "download abandoned: job cancelled")))
        abandoned?.cancel()
    }
}
