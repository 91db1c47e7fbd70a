import Foundation
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import Synchronization
import Testing

@testable import HalcyonWorker

/// Group commit of completions (the database path is covered by every worker test).
@Suite struct CompletionBatcherTests {
    static func result(_ id: Int64) -> CompletionBatcher.Completion {
        (
            Claim(id: id, attempt: 1),
            JobResult(key: "k\(id)", digest: "d", path: "p", bytes: 1, width: 1, height: 1, format: "png", cacheHit: false, source: nil),
            StageTimings()
        )
    }

    @Test func completionsArrivingDuringAWriteShareTheNextOne() async throws {
        let batches = Mutex<[[Int64]]>([])
        let gate = CancellationFlag()  // holds the first write open until the others are waiting
        // Odd ids were "rescued meanwhile": the write does not report them as ours.
        let batcher = CompletionBatcher { batch in
            let first = batches.withLock {
                $0.append(batch.map(\.claim.id)); return $0.count == 1
            }
            while first, !gate.isCancelled { try await Task.sleep(for: .milliseconds(1)) }
            return Set(batch.map(\.claim.id).filter { $0 % 2 == 0 })
        }
        async let lead = batcher.complete(Self.result(0))
        while batches.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(1)) }
        let rest = Task {
            try await withThrowingTaskGroup(of: (Int64, Bool).self) { group in
                for id in Int64(1)..<100 { group.addTask { (id, try await batcher.complete(Self.result(id))) } }
                return try await group.reduce(into: [Int64: Bool]()) { $0[$1.0] = $1.1 }
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        gate.cancel()
        var outcomes = try await rest.value
        outcomes[0] = try await lead
        #expect(outcomes.count == 100)
        #expect(outcomes.allSatisfy { $0.value == ($0.key % 2 == 0) })
        let written = batches.withLock { $0 }
        #expect(written.flatMap { $0 }.sorted() == Array(0..<100))  // each exactly once
        #expect(written.first == [0])
        #expect(written.count <= 3, "\(written.map(\.count)) per write")  // 2, unless some arrived after the gate opened
    }

    @Test func aFailedWriteFailsItsBatchAndTheNextCallStillWorks() async throws {
        let calls = Mutex(0)
        let batcher = CompletionBatcher { batch in
            let n = calls.withLock {
                $0 += 1; return $0
            }
            if n == 1 { throw HalcyonError(.internal, "connection lost") }
            return Set(batch.map(\.claim.id))
        }
        await #expect(throws: HalcyonError.self) { try await batcher.complete(Self.result(1)) }
        #expect(try await batcher.complete(Self.result(1)))
    }

    /// An application's trigger refusing one row fails the whole batch statement; the batch is
    /// then written row by row, so only that row fails (it used to block the batch forever).
    @Test func aRowTheDatabaseRefusesFailsAloneAndTheRestIsRecorded() async throws {
        let writes = Mutex<[[Int64]]>([])
        let gate = CancellationFlag()
        let batcher = CompletionBatcher { batch in
            let ids = batch.map(\.claim.id)
            let first = writes.withLock {
                $0.append(ids); return $0.count == 1
            }
            while first, !gate.isCancelled { try await Task.sleep(for: .milliseconds(1)) }
            if ids.contains(5) { throw DatabaseError(message: "audit rejected", sqlState: "P0001", connectionLost: false) }
            return Set(ids)
        }
        async let lead = batcher.complete(Self.result(0))
        while writes.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(1)) }
        let rest = (1...9).map { id in
            Task { () -> Result<Bool, any Error> in
                do { return .success(try await batcher.complete(Self.result(Int64(id)))) } catch { return .failure(error) }
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        gate.cancel()
        #expect(try await lead)
        for (i, task) in rest.enumerated() {
            switch await task.value {
            case .success(let ours): #expect(ours && i + 1 != 5)
            case .failure(let error): #expect(i + 1 == 5 && (error as? DatabaseError)?.sqlState == "P0001")
            }
        }
        // The refused batch, then each of its rows on its own.
        #expect(writes.withLock { $0 }.filter { $0.count == 1 && $0 != [0] }.count == 9)
    }
}
