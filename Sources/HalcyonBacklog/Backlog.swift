import Foundation
import HalcyonQueue

/// A job table as hours of work leave it, written straight into `halcyon.jobs`: the fixture of
/// the bench's S scenario and soak, and of the query-plan tests.
///
/// - **History:** finished rows (98 % succeeded, 2 % failed with an error entry; one in a
///   hundred with a webhook still pending, due tomorrow), finished over the last three hours.
///   Retention then deletes 70 % of them, scattered, and `VACUUM` leaves their space to the
///   backlog's rows — so the backlog's ids lie all over the heap, as they do on a table that
///   has been pruned for weeks (the `id` column's correlation falls to about 0.6).
/// - **Backlog:** `queued` jobs, four chains per logical source with adjacent ids (a source's
///   variants are enqueued together), one logical source in `hotEvery` (half by default)
///   sharing 200 hot cache keys (store hits once made) and the others with keys of their own; 70 % in `default`, 20 % in
///   `thumbnails`, 10 % in `backfill`; one source in 19 at priority 1; one in `delayedEvery`
///   (ten) delayed by a day; one in `failingEvery` naming `failingSource` instead (it fails
///   and is retried); with `fairKeys`, each logical source's jobs under one of that many fair keys.
/// - **Churn:** a seventh of the backlog claimed and rescued (an attempt spent, a
///   `worker.lease_expired` entry), a fifth rewritten in place, an eleventh claimed and released
///   — every one a new row version elsewhere in the heap, and dead tuples behind them. The
///   claim order is left as it was (a real rescue would move its rows to the back), so that
///   every part of a drain does the same kind of work and a soak's tenths compare.
///
/// Then `ANALYZE`, as autovacuum would have done. Every row's `cache_key` starts with
/// `keyPrefix`, so a caller can find and delete exactly these rows.
package struct Backlog: Sendable {
    /// Queued jobs in the backlog.
    package var queued: Int
    /// Finished rows written before the backlog; 30 % of them stay.
    package var history: Int
    /// Sources the logical sources cycle through (e.g. `file://` URLs under a worker's file root).
    package var sources: [String]
    /// A source that fails, for one logical source in `failingEvery` (nil: none).
    package var failingSource: String?
    package var failingEvery = 100
    /// One logical source in this many waits a day to run (nil: none).
    package var delayedEvery: Int? = 10
    package var keyPrefix = "halcyon-bench:backlog-"
    /// The chains each logical source is enqueued with, in id order (default `defaultChains`).
    package var chains = Backlog.defaultChains
    /// One logical source in this many shares one of 200 hot cache keys (store hits once made);
    /// the others have keys of their own. Default 2.
    package var hotEvery = 2
    /// Fair keys the logical sources are spread over (`tenant-0` …), round-robin; 0 (default): none.
    package var fairKeys = 0

    /// The chains of the S scenario's backlog.
    package static let defaultChains = [
        "resize(64x64)", "resize(96x96, mode=fill) |> format(webp)", "resize(32x32) |> format(png)", "crop(50x50) |> flip",
    ]
    package static let queues = ["thumbnails", "backfill"]

    package init(queued: Int, history: Int? = nil, sources: [String], failingSource: String? = nil) {
        self.queued = queued
        self.history = history ?? queued
        self.sources = sources
        self.failingSource = failingSource
    }

    /// Writes the rows (a million queued take about a minute here) and analyzes the table.
    package func fill(_ c: PGConnection) async throws {
        precondition(!sources.isEmpty, "a backlog needs sources")
        try await c.run(BacklogSQL.AddQueues(queues: Self.queues))
        try await c.run(BacklogSQL.WriteHistory(sources: sources, keyPrefix: keyPrefix, rows: history))
        try await c.run(BacklogSQL.PruneHistory(keyPattern: keyPrefix + "history-%"))
        try await c.run(BacklogSQL.VacuumJobs())
        try await enqueue(c, jobs: 0..<queued)
        let backlog = BacklogSQL.BacklogRows(keyPrefix: keyPrefix)
        try await c.run(BacklogSQL.ChurnClaimed(rows: backlog))
        try await c.run(BacklogSQL.ChurnRescued())
        try await c.run(BacklogSQL.ChurnRewritten(rows: backlog))
        try await c.run(BacklogSQL.ChurnHeld(rows: backlog))
        try await c.run(BacklogSQL.ChurnReleased())
        try await c.run(BacklogSQL.AnalyzeJobs())
        try await c.run(BacklogSQL.AnalyzeQueues())
    }

    /// Enqueues the backlog's jobs numbered `jobs` (the fill writes `0..<queued`; more can be
    /// appended while workers work, as an application keeps enqueueing).
    package func enqueue(_ c: PGConnection, jobs: Range<Int>) async throws {
        guard !jobs.isEmpty else { return }
        try await c.run(BacklogSQL.EnqueueBacklog(backlog: self, jobs: jobs))
    }

    /// `ANALYZE halcyon.jobs`, as autovacuum does after a period of work.
    package static func analyzeJobs(_ c: PGConnection) async throws {
        try await c.run(BacklogSQL.AnalyzeJobs())
    }

    /// Deletes every row the backlog wrote (and what became of them), then vacuums.
    package func remove(_ c: PGConnection) async throws {
        try await c.run(BacklogSQL.RemoveBacklog(keyPattern: keyPrefix + "%"))
        try await c.run(BacklogSQL.VacuumJobs())
    }
}
