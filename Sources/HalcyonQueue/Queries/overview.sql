-- The dashboard: each statement reads a bounded number of rows however large the table is.
-- `halcyon status` (status.sql) is the exact, slower view.

-- name: overviewCounts :many
-- Queued, running, failed and cancelled rows by state and queue, at most $1 rows of each state.
-- Each branch reads one partial index (the claim, lease and unsuccessful indexes) in its order:
-- without the order, a state that holds most of the table is read by a sequential scan, which
-- on stale statistics (the state now rare) reads the whole table.
SELECT state::text AS state, queue, count(*) AS count FROM (
    (SELECT state, queue FROM halcyon.jobs WHERE state = 'queued' ORDER BY queue, priority DESC, run_at, id LIMIT $1::int)
    UNION ALL (SELECT state, queue FROM halcyon.jobs WHERE state = 'running' ORDER BY locked_until LIMIT $1::int)
    UNION ALL (SELECT state, queue FROM halcyon.jobs WHERE state = 'failed' ORDER BY finished_at LIMIT $1::int)
    UNION ALL (SELECT state, queue FROM halcyon.jobs WHERE state = 'cancelled' ORDER BY finished_at LIMIT $1::int)
) s GROUP BY 1, 2;

-- name: tableEstimate :one
-- The table's size in bytes and its row density as of its last ANALYZE (-1: never).
SELECT pg_relation_size(c.oid) AS bytes, c.reltuples::float8 AS tuples, c.relpages AS pages,
       current_setting('block_size')::int AS block
FROM pg_class c WHERE c.oid = 'halcyon.jobs'::regclass;

-- name: succeededCount :one
-- Succeeded rows, counted (only while the table is small).
SELECT count(*) AS n FROM halcyon.jobs WHERE state = 'succeeded';

-- name: queueList :many
-- The first $1 queues by name, with whether each is paused and since when, and its limits.
SELECT name, paused, extract(epoch FROM now() - paused_at)::float8 AS paused_for, max_running, max_per_second, max_running_per_key
FROM halcyon.queues ORDER BY name LIMIT $1::int;

-- name: throughputByMinute :many
-- Jobs finished per minute over the last hour, from the latest $1 of them.
SELECT extract(epoch FROM date_trunc('minute', finished_at))::bigint AS minute,
       count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE state = 'failed') AS failed,
       count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
       count(*) AS finished
FROM (SELECT finished_at, state FROM halcyon.jobs
      WHERE finished_at > now() - interval '1 hour' ORDER BY finished_at DESC LIMIT $1::int) f
GROUP BY 1 ORDER BY 1;

-- name: failuresByCode :many
-- Jobs that failed in the last 24 hours, by their last error's code (the 20 most common), from
-- the latest $1; `read_rows` is how many were read (all codes).
SELECT coalesce(code, '?') AS code, count(*) AS count,
       (array_agg(message ORDER BY finished_at DESC))[1] AS latest_message,
       max(finished_at) AS last_seen, (array_agg(id ORDER BY finished_at DESC))[1] AS latest_id,
       (sum(count(*)) OVER ())::bigint AS read_rows
FROM (SELECT id, errors -> -1 ->> 'code' AS code, coalesce(errors -> -1 ->> 'message', last_error) AS message, finished_at
      FROM halcyon.jobs WHERE state = 'failed' AND finished_at > now() - interval '24 hours'
      ORDER BY finished_at DESC LIMIT $1::int) f
GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 20;

-- name: listJobs :many
-- A page of jobs matching the filter (admin.sql's `jobFilter`: $1–$7 and the states), newest
-- first, below id $8 (null: from the newest), $9 rows at most.
SELECT j.id, j.state::text AS state, j.queue, j.source, j.processors, j.attempt, j.max_attempts,
       j.created_at, j.finished_at, j.errors -> -1 ->> 'code' AS code, j.last_error, j.result_digest,
       j.result_format, j.result_width, j.result_height, j.result_bytes, j.cache_hit, j.tags
FROM halcyon.jobs j
WHERE /*jobFilter*/ AND ($8::bigint IS NULL OR j.id < $8::bigint)
ORDER BY j.id DESC LIMIT $9::int;

-- name: countFilteredCapped :one
-- How many rows match the filter (admin.sql's `jobFilter`), counting at most $8.
SELECT count(*) AS n FROM (SELECT 1 FROM halcyon.jobs j WHERE /*jobFilter*/ LIMIT $8::int) s;
