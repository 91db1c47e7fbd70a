import Foundation
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// `halcyon.leases`: one holder at a time, lapsing by itself, renewed while held.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct LeaseTests {
    @Test func oneHolderAtATimeUntilItLapsesOrIsGivenUp() async throws {
        let db = try await TestDatabase.create()
        let c = try await db.connect()
        defer { Task { await c.close() } }
        let q = JobQueue(connection: c)
        #expect(try await q.acquireLease(.storeSweep, holder: "a", for: .seconds(60)))
        #expect(try await !q.acquireLease(.storeSweep, holder: "b", for: .seconds(60)))
        // Another duty is another lease.
        #expect(try await q.acquireLease(.rowRetention, holder: "b", for: .seconds(60)))
        // Its holder may take it again (a renewal); a stranger cannot give it up.
        #expect(try await q.acquireLease(.storeSweep, holder: "a", for: .seconds(60)))
        #expect(try await q.renewLease(.storeSweep, holder: "a"))
        #expect(try await !q.renewLease(.storeSweep, holder: "b"))
        try await q.releaseLease(.storeSweep, holder: "b")
        #expect(try await !q.acquireLease(.storeSweep, holder: "b", for: .seconds(60)))
        // Released: free. Lapsed: free, and its old holder cannot renew it any more.
        try await q.releaseLease(.storeSweep, holder: "a")
        #expect(try await q.acquireLease(.storeSweep, holder: "b", for: .milliseconds(200)))
        try await Task.sleep(for: .milliseconds(400))
        #expect(try await q.acquireLease(.storeSweep, holder: "a", for: .seconds(60)))
        #expect(try await !q.renewLease(.storeSweep, holder: "b"))
        #expect(JobQueue.leaseHolder("w") != JobQueue.leaseHolder("w2") && JobQueue.leaseHolder("w").hasPrefix("w ("))
    }

    @Test func withLeaseRenewsWhileItWorksAndRaisesLostWhenTakenAway() async throws {
        let db = try await TestDatabase.create()
        let c = try await db.connect()
        defer { Task { await c.close() } }
        let q = JobQueue(connection: c)
        // Held while it works: renewed (every 2 s here), so nobody else gets it meanwhile.
        let lost = CancellationFlag()
        func expiry() async throws -> String { try await db.query("SELECT expires_at FROM halcyon.leases").value(0, "expires_at") ?? "" }
        let held = try await q.withLease(.storeSweep, holder: "a", duration: .seconds(6), lost: lost) { () -> Bool in
            let first = try await expiry()
            #expect(try await waitUntil(120) { try await expiry() > first }, "the lease was never renewed")
            return try await JobQueue(connection: try await db.connect()).acquireLease(.storeSweep, holder: "b")
        }
        #expect(held == false)
        #expect(!lost.isCancelled)
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.leases").value(0, "n") == "0")

        // Taken away (its row given to another holder): the next renewal raises `lost`.
        let lost2 = CancellationFlag()
        let ran = try await q.withLease(.storeSweep, holder: "a", duration: .seconds(1), lost: lost2) { () -> Bool in
            try await db.query("UPDATE halcyon.leases SET holder = 'b', expires_at = now() + interval '1 hour'")
            _ = await lost2.sleep(seconds: 10)
            return lost2.isCancelled
        }
        #expect(ran == true)
        // Not released from under its new holder.
        #expect(try await db.query("SELECT holder FROM halcyon.leases").value(0, "holder") == "b")
        // And a held lease is not entered.
        #expect(try await q.withLease(.storeSweep, holder: "a", lost: CancellationFlag()) { true } == nil)
    }
}
