import HalcyonQueue
import HalcyonRuntime
import Testing

@testable import HalcyonWorker

/// The worker's record of what it holds, one entry per claim (id and attempt).
struct HeldJobsTests {
    func job(_ id: Int64, attempt: Int) -> Job { Job(id: id, source: "https://example.com/\(id).jpg", attempt: attempt) }

    @Test func anOldAttemptCannotDropOrRecordTheNewClaim() {
        var held = HeldJobs()
        let first = job(11, attempt: 1), second = job(11, attempt: 2)
        held.hold(first, cancel: CancellationFlag())
        let recording = held.startRecording(first)
        #expect(recording)
        // Its failure was written with no backoff and the same worker claimed the job again
        // before the first attempt's bookkeeping was done.
        held.hold(second, cancel: CancellationFlag())
        held.drop(first)
        #expect(held.holds(second), "the first attempt's clean-up dropped the second claim")
        #expect(!held.holds(first))
        let recordingOld = held.startRecording(first)
        #expect(!recordingOld)
        #expect(held.occupyingSlots == 1, "the new claim takes a slot")
        #expect(held.claims == [Claim(id: 11, attempt: 2)])
        held.drop(second)
        #expect(held.isEmpty)
    }

    @Test func slotsAreFreedWhileRecording() {
        var held = HeldJobs()
        for id in 1...3 { held.hold(job(Int64(id), attempt: 1), cancel: CancellationFlag()) }
        held.startRecording(job(2, attempt: 1))
        #expect(held.count == 3 && held.occupyingSlots == 2)
    }

    @Test func aHeartbeatCancelsOnlyTheAttemptItSawLost() {
        var held = HeldJobs()
        let a = CancellationFlag(), b = CancellationFlag(), c = CancellationFlag()
        held.hold(job(1, attempt: 1), cancel: a)
        held.hold(job(2, attempt: 1), cancel: b)
        let snapshot = held.claims
        // While the heartbeat ran: job 2's attempt 1 was recorded and attempt 2 claimed.
        held.drop(job(2, attempt: 1))
        held.hold(job(2, attempt: 2), cancel: c)
        let lost = held.lost(from: snapshot, held: [])
        #expect(lost.map(\.id) == [1])
        #expect(lost.first.map { $0.cancel === a } == true)
        #expect(held.lost(from: held.claims, held: [1, 2]).isEmpty)
    }

    @Test func aClaimRecordingItsOutcomeIsNotReportedLost() {
        var held = HeldJobs()
        held.hold(job(7, attempt: 1), cancel: CancellationFlag())
        held.hold(job(8, attempt: 1), cancel: CancellationFlag())
        let snapshot = held.claims
        held.startRecording(job(7, attempt: 1))  // its success was written while the heartbeat ran
        #expect(held.lost(from: snapshot, held: []).map(\.id) == [8])
    }

    @Test func releasingKeepsClaimsHeldUntilTheyAreDropped() {
        var held = HeldJobs()
        held.hold(job(5, attempt: 3), cancel: CancellationFlag())
        let left = held.all
        #expect(left.map(\.claim) == [Claim(id: 5, attempt: 3)])
        #expect(held.claims == [Claim(id: 5, attempt: 3)])  // still renewed while the release is written
        held.hold(job(6, attempt: 1), cancel: CancellationFlag())
        held.drop(left.map(\.claim) + [Claim(id: 6, attempt: 0)])  // an older attempt of 6 drops nothing
        #expect(held.claims == [Claim(id: 6, attempt: 1)])
    }
}
