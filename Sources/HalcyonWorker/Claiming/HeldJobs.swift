import HalcyonQueue
import HalcyonRuntime

/// The jobs a worker holds: claimed, not yet recorded. Each entry is one *claim* — a job id
/// and the attempt it was claimed for — because a worker may claim a job again (a transient
/// failure with a short backoff) before the previous attempt's bookkeeping has finished. Every
/// operation of an attempt therefore checks it still is the held one: an old attempt must
/// never drop, free or cancel the new one's entry (it used to, and the new attempt then ran
/// without lease renewals until it was rescued).
struct HeldJobs {
    struct Entry {
        /// The claim held (its attempt and stamp).
        var claim: Claim
        var queue: String = QueueName.default
        var cancel: CancellationFlag
        /// Done executing, its outcome being written: still held (heartbeats, release at
        /// shutdown) but no longer taking a slot, so the claim loop may take another job.
        var recording = false
    }

    private var entries: [Int64: Entry] = [:]

    var isEmpty: Bool { entries.isEmpty }
    var count: Int { entries.count }
    /// Held jobs that still take a slot (claimed and not yet recording).
    var occupyingSlots: Int { entries.values.count { !$0.recording } }

    /// Held jobs of `queue` that still take a slot.
    func occupyingSlots(queue: String) -> Int { entries.values.count { !$0.recording && $0.queue == queue } }

    /// Holds a fresh claim, replacing any older attempt of the same job.
    mutating func hold(_ job: Job, cancel: CancellationFlag) {
        entries[job.id] = Entry(claim: job.claim, queue: job.queue, cancel: cancel)
    }

    /// Whether this claim (id, attempt and stamp) is still held.
    func holds(_ job: Job) -> Bool { entries[job.id]?.claim == job.claim }

    /// Marks this claim as recording its outcome; false when it is no longer held.
    @discardableResult
    mutating func startRecording(_ job: Job) -> Bool {
        guard holds(job) else { return false }
        entries[job.id]?.recording = true
        return true
    }

    /// Lets go of this claim; a newer claim of the same job stays.
    mutating func drop(_ job: Job) {
        if holds(job) { entries.removeValue(forKey: job.id) }
    }

    /// The held claims, for a heartbeat.
    var claims: [Claim] { entries.values.map(\.claim) }

    /// The cancellation flags of the claims in `snapshot` the database no longer counts as
    /// ours (not in `held`), still the held attempt and still executing. A claim recording its
    /// outcome is left alone: its row was probably just written, and if it was taken from us
    /// the guarded write refuses it anyway.
    func lost(from snapshot: [Claim], held: Set<Int64>) -> [(id: Int64, cancel: CancellationFlag)] {
        snapshot.compactMap { claim in
            guard !held.contains(claim.id), let e = entries[claim.id], e.claim == claim, !e.recording else { return nil }
            return (claim.id, e.cancel)
        }
    }

    /// Every held claim and its flag, still held: a job being released at shutdown stays ours
    /// (its lease renewed) until the release is written.
    var all: [(claim: Claim, cancel: CancellationFlag)] {
        entries.values.map { ($0.claim, $0.cancel) }
    }

    /// Lets go of these claims (each only if it is still the held attempt).
    mutating func drop(_ claims: [Claim]) {
        for claim in claims where entries[claim.id]?.claim == claim {
            entries[claim.id] = nil
        }
    }
}
