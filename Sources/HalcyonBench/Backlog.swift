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
///   variants are enqueued together), half of the logical sources sharing 200 hot cache keys
///   (store hits once made) and half with keys of their own; 70 % in `default`, 20 % in
///   `thumbnails`, 10 % in `backfill`; one source in 19 at priority 1; one in `delayedEvery`
///   (ten) delayed by a day; one in `failingEvery` naming `failingSource` instead (it fails
///   and is retried).
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

    /// The chains each logical source is enqueued with, in id order.
    package static let chains = [
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
        let sourceArray = PGRows.textArrayLiteral(sources)
        try await c.execute(
            "INSERT INTO halcyon.queues (name) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING", [PGRows.textArrayLiteral(Self.queues)])
        try await c.execute(
            """
            INSERT INTO halcyon.jobs (source, processors, cache_key, queue, state, attempt, started_at, finished_at,
                                      result_key, result_digest, result_path, result_bytes, result_width, result_height, result_format,
                                      cache_hit, errors, last_error, options, callback_status, callback_at)
            SELECT src, 'resize(64x64)', $2 || 'history-' || (g / 4),
                   (ARRAY['default', 'default', 'default', 'thumbnails', 'backfill'])[g % 5 + 1],
                   (CASE WHEN failed THEN 'failed' ELSE 'succeeded' END)::halcyon.job_state, 1, at - interval '40 ms', at,
                   CASE WHEN NOT failed THEN $2 || 'history-' || (g / 4) || '@resize(64x64,mode=fit)' END,
                   CASE WHEN NOT failed THEN md5(g::text) || md5(g::text) END,
                   CASE WHEN NOT failed THEN 'objects/00/00/' || md5(g::text) || md5(g::text) || '.jpg' END,
                   CASE WHEN NOT failed THEN 1234 END, CASE WHEN NOT failed THEN 64 END, CASE WHEN NOT failed THEN 48 END,
                   CASE WHEN NOT failed THEN 'jpeg' END, NOT failed AND g % 3 = 0,
                   CASE WHEN failed THEN jsonb_build_array(jsonb_build_object('at', at, 'attempt', 1, 'code', 'fetch.http_status',
                                                                                'message', 'HTTP 404', 'source', src))
                        ELSE '[]' END,
                   CASE WHEN failed THEN 'fetch.http_status: HTTP 404' END,
                   CASE WHEN g % 100 = 0 THEN '{"callback_url": "http://127.0.0.1:9/hook"}' ELSE '{}' END::jsonb,
                   CASE WHEN g % 100 = 0 THEN 'pending' END, CASE WHEN g % 100 = 0 THEN now() + interval '1 day' END
            FROM generate_series(1, $3::int) AS g,
                 LATERAL (SELECT g % 50 = 0 AS failed, now() - interval '1 second' - interval '3 hours' * (1 - g::float8 / $3::int) AS at,
                                 ($1::text[])[g % cardinality($1::text[]) + 1] AS src) AS x
            """, [sourceArray, keyPrefix, String(history)])
        try await c.execute("DELETE FROM halcyon.jobs WHERE cache_key LIKE $1 AND id % 10 < 7", [keyPrefix + "history-%"])
        try await c.execute("VACUUM halcyon.jobs")
        try await enqueue(c, jobs: 0..<queued)
        let backlog = [keyPrefix + "hot-%", keyPrefix + "own-%"]
        let inBacklog = "(cache_key LIKE $1 OR cache_key LIKE $2) AND state = 'queued'"
        try await c.execute(
            "UPDATE halcyon.jobs SET state = 'running', locked_by = 'halcyon-bench-churn', locked_until = now(), attempt = attempt + 1, started_at = now() WHERE \(inBacklog) AND id % 7 = 3",
            backlog)
        try await c.execute(
            """
            UPDATE halcyon.jobs SET state = 'queued', locked_by = NULL, locked_until = NULL,
                   errors = errors || jsonb_build_array(jsonb_build_object('at', now(), 'attempt', attempt, 'code', 'worker.lease_expired',
                                                                           'message', 'the worker holding it stopped renewing its lease')),
                   last_error = 'worker.lease_expired: the worker holding it stopped renewing its lease'
            WHERE locked_by = 'halcyon-bench-churn'
            """)
        try await c.execute("UPDATE halcyon.jobs SET priority = priority WHERE \(inBacklog) AND id % 5 = 1", backlog)
        try await c.execute(
            "UPDATE halcyon.jobs SET state = 'running', locked_by = 'halcyon-bench-churn', locked_until = now() WHERE \(inBacklog) AND id % 11 = 4",
            backlog)
        try await c.execute("UPDATE halcyon.jobs SET state = 'queued', locked_by = NULL, locked_until = NULL WHERE locked_by = 'halcyon-bench-churn'")
        try await c.execute("ANALYZE halcyon.jobs")
        try await c.execute("ANALYZE halcyon.queues")
    }

    /// Enqueues the backlog's jobs numbered `jobs` (the fill writes `0..<queued`; more can be
    /// appended while workers work, as an application keeps enqueueing).
    package func enqueue(_ c: PGConnection, jobs: Range<Int>) async throws {
        guard !jobs.isEmpty else { return }
        try await c.execute(
            """
            INSERT INTO halcyon.jobs (source, processors, cache_key, queue, priority, run_at)
            SELECT CASE WHEN $4::text IS NOT NULL AND s % $5::int = 7 % $5::int THEN $4::text
                        ELSE ($1::text[])[s % cardinality($1::text[]) + 1] END,
                   ($3::text[])[g % cardinality($3::text[]) + 1],
                   $2 || CASE WHEN s % 2 = 0 THEN 'hot-' || (s % 400) ELSE 'own-' || s END,
                   (ARRAY['default', 'default', 'default', 'default', 'default', 'default', 'default',
                          'thumbnails', 'thumbnails', 'backfill'])[s % 10 + 1],
                   CASE WHEN s % 19 = 0 THEN 1 ELSE 0 END,
                   CASE WHEN $7::int > 0 AND s % $7::int = 3 % $7::int THEN now() + interval '1 day' ELSE now() END
            FROM generate_series($6::int, $8::int - 1) AS g, LATERAL (SELECT g / \(Self.chains.count) AS s) AS x
            """,
            [
                PGRows.textArrayLiteral(sources), keyPrefix, PGRows.textArrayLiteral(Self.chains), failingSource,
                String(max(1, failingEvery)), String(jobs.lowerBound), String(delayedEvery.map { max(1, $0) } ?? 0),
                String(jobs.upperBound),
            ])
    }

    /// Deletes every row the backlog wrote (and what became of them), then vacuums.
    package func remove(_ c: PGConnection) async throws {
        try await c.execute("DELETE FROM halcyon.jobs WHERE cache_key LIKE $1", [keyPrefix + "%"])
        try await c.execute("VACUUM halcyon.jobs")
    }
}
