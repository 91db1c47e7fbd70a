-- What operators and applications do: enqueue, show, wait, retry, cancel (by id, or a batch at a
-- time over the rows a filter matches).

-- name: enqueue :one
-- $1 source, $2 processors, $3 cache_key, $4 fallback_sources (text[]), $5 options (jsonb), $6
-- priority, $7 max_attempts, $8 run_at (NULL = now), $9 queue, $10 unique_key, $11 tags (text[]),
-- $12 fair_key (NULL = the queue's common share), $13 traceparent and $14 tracestate (the
-- enqueuer's W3C trace context, NULL = none).
-- Returns the id and whether it is a new row (false: a duplicate unique_key).
SELECT id, inserted FROM halcyon.enqueue_job(
    source => $1, processors => $2, cache_key => $3, fallback_sources => $4::text[], options => $5::jsonb,
    priority => $6::int, max_attempts => $7::int, run_at => coalesce($8::timestamptz, now()),
    queue => $9, unique_key => $10, tags => $11::text[], fair_key => $12, traceparent => $13, tracestate => $14);

-- name: showJob :one
-- The whole row of job $1: every column of `halcyon.jobs`, in the table's order (the columns of
-- Swift's `JobRow.schema`, which decodes jsonb and the state from their text; the tests check
-- that the two agree).
SELECT * FROM halcyon.jobs WHERE id = $1::bigint;

-- name: jobStates :many
-- The state and failure code of jobs $1 (bigint[]); ids not returned do not exist.
SELECT id, state::text AS state, errors -> -1 ->> 'code' AS code, cache_hit, result_path
FROM halcyon.jobs WHERE id = ANY($1::bigint[]);

-- fragment: jobFilter
-- The rows a bulk operation's filter (`JobQueue.JobFilter`) matches: states as literals in place
-- of `/*states*/` (filled in from a `[JobState]`, a closed set: nothing to quote; the planner
-- can then use each state's partial index, which it cannot for a parameter, an enum array's
-- cast not being folded at plan time), $1 the last error's code (null: any), $2 seconds:
-- finished (or, unfinished, created) within them (null: any time), $3 queue (null: any), $4 tag
-- (null: any), $5 a substring of the source, matched literally and case-insensitively (null:
-- any), $6 and $7 a time range [from, to) of the same instant (null: open). Also in
-- overview.sql.
j.state IN (/*states*/)
AND ($1::text IS NULL OR j.errors -> -1 ->> 'code' = $1::text)
AND ($2::float8 IS NULL OR coalesce(j.finished_at, j.created_at) >= now() - make_interval(secs => $2::float8))
AND ($3::text IS NULL OR j.queue = $3::text)
AND ($4::text IS NULL OR j.tags @> ARRAY[$4::text])
AND ($5::text IS NULL OR strpos(lower(j.source), lower($5::text)) > 0)
AND ($6::timestamptz IS NULL OR coalesce(j.finished_at, j.created_at) >= $6::timestamptz)
AND ($7::timestamptz IS NULL OR coalesce(j.finished_at, j.created_at) < $7::timestamptz);

-- fragment: requeueable
-- A failed or cancelled row that may be requeued: its unique key (if any) is not held by another
-- unfinished job, and of several with the same key only the newest goes. (A requeued row gets
-- a fresh attempt budget and is runnable now: `SET state = 'queued', attempt = 0, …`.)
j.state IN ('failed', 'cancelled')
AND (j.unique_key IS NULL OR (
    NOT EXISTS (SELECT 1 FROM halcyon.jobs k WHERE k.unique_key = j.unique_key AND k.state IN ('queued', 'running'))
    AND j.id = (SELECT max(k.id) FROM halcyon.jobs k WHERE k.unique_key = j.unique_key AND k.state IN ('failed', 'cancelled'))));

-- name: retry :many
-- Requeues failed or cancelled jobs $1 (bigint[]) with a fresh attempt budget; a job whose
-- unique key is held by another unfinished job stays as it is. Returns the ids requeued.
UPDATE halcyon.jobs j
SET state = 'queued', attempt = 0, run_at = now(), finished_at = NULL, locked_by = NULL, locked_until = NULL
WHERE j.id = ANY($1::bigint[]) AND /*requeueable*/
RETURNING j.id;

-- name: cancel :many
-- Cancels queued or running jobs $1 (bigint[]); a running job's worker notices at its next
-- heartbeat. Returns the ids cancelled.
UPDATE halcyon.jobs
SET state = 'cancelled', finished_at = now(), locked_by = NULL, locked_until = NULL
WHERE id = ANY($1::bigint[]) AND state IN ('queued', 'running')
RETURNING id;

-- name: now :one
-- The database's clock, which a bulk operation reads once at its start.
SELECT now()::text AS now;

-- name: countFiltered :one
-- How many rows match the filter ($1–$7 and the states, as `jobFilter`).
SELECT count(*) AS n FROM halcyon.jobs j WHERE /*jobFilter*/;

-- name: retryFiltered :many
-- Requeues up to $8 failed or cancelled rows matching the filter ($1–$7 and the states) that
-- finished before $9 (the operation's start: a row that fails again while the operation runs is
-- not retried again by it); called until it returns fewer, so no statement holds many row locks
-- for long.
UPDATE halcyon.jobs j
SET state = 'queued', attempt = 0, run_at = now(), finished_at = NULL, locked_by = NULL, locked_until = NULL
WHERE j.id IN (
    SELECT j.id FROM halcyon.jobs j
    WHERE /*jobFilter*/ AND /*requeueable*/ AND coalesce(j.finished_at, j.created_at) < $9::timestamptz
    LIMIT $8::int FOR UPDATE)
RETURNING j.id;

-- name: cancelFiltered :many
-- Cancels up to $8 queued or running rows matching the filter ($1–$7 and the states) created
-- before $9 (the operation's start: jobs enqueued meanwhile are left alone, so the operation
-- ends).
UPDATE halcyon.jobs j
SET state = 'cancelled', finished_at = now(), locked_by = NULL, locked_until = NULL
WHERE j.id IN (
    SELECT j.id FROM halcyon.jobs j
    WHERE /*jobFilter*/ AND j.state IN ('queued', 'running') AND coalesce(j.finished_at, j.created_at) < $9::timestamptz
    LIMIT $8::int FOR UPDATE)
RETURNING j.id;
