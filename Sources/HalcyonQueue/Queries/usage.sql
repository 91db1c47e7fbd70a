-- Usage per queue and fair key (migrations/0016_usage.sql): the roll-up of the events the
-- `jobs_record_usage` trigger appends, its retention, and what `halcyon usage` and the
-- dashboard read. Hours are UTC.

-- name: rollUpUsage :one
-- Moves up to $1 events (any, skipping those another roll-up holds) into their hours of
-- halcyon.usage, in one statement: two roll-ups at once take different events, and an event is
-- counted once whichever commits. Returns how many events moved and how many hours they touched.
WITH taken AS (
    SELECT ctid AS row_id FROM halcyon.usage_events LIMIT $1::int FOR UPDATE SKIP LOCKED
),
moved AS (
    DELETE FROM halcyon.usage_events e USING taken WHERE e.ctid = taken.row_id
    RETURNING e.*
),
rolled AS (
    INSERT INTO halcyon.usage AS u (queue, fair_key, hour, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms,
                                    encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits)
    SELECT queue, coalesce(fair_key, ''), date_trunc('hour', at, 'UTC'), sum(succeeded), sum(failed), sum(cancelled), sum(retried),
           sum(decode_cpu_ms), sum(process_cpu_ms), sum(encode_cpu_ms), sum(store_cpu_ms), sum(bytes_fetched), sum(bytes_stored),
           sum(store_hits)
    FROM moved
    GROUP BY 1, 2, 3
    ON CONFLICT (queue, fair_key, hour) DO UPDATE
    SET succeeded = u.succeeded + excluded.succeeded, failed = u.failed + excluded.failed,
        cancelled = u.cancelled + excluded.cancelled, retried = u.retried + excluded.retried,
        decode_cpu_ms = u.decode_cpu_ms + excluded.decode_cpu_ms, process_cpu_ms = u.process_cpu_ms + excluded.process_cpu_ms,
        encode_cpu_ms = u.encode_cpu_ms + excluded.encode_cpu_ms, store_cpu_ms = u.store_cpu_ms + excluded.store_cpu_ms,
        bytes_fetched = u.bytes_fetched + excluded.bytes_fetched, bytes_stored = u.bytes_stored + excluded.bytes_stored,
        store_hits = u.store_hits + excluded.store_hits
    RETURNING 1
)
SELECT (SELECT count(*) FROM moved) AS events, (SELECT count(*) FROM rolled) AS hours;

-- name: pruneUsage :one
-- Deletes up to $2 hours of usage that ended more than $1 seconds ago. Returns how many went.
WITH doomed AS (
    SELECT ctid AS row_id FROM halcyon.usage
    WHERE hour < now() - make_interval(secs => $1::float8) - interval '1 hour'
    LIMIT $2::int
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM halcyon.usage u USING doomed WHERE u.ctid = doomed.row_id
    RETURNING 1
)
SELECT count(*) AS n FROM gone;

-- name: usageReport :many
-- Usage since $1 (timestamptz, taken back to the start of its hour: usage is kept by the hour),
-- per queue, or per queue and fair key when $2 (bool), per hour too when $3 (bool), of queue $4
-- only (NULL: every queue). The rolled-up hours plus the events not rolled up yet, so it is
-- exact at any moment. `fair_key` is '' for the common share (and when not by key), `hour` the
-- hour's start in UTC (`2026-11-28T01:00:00Z`), NULL when not hourly.
WITH since AS (
    SELECT date_trunc('hour', $1::timestamptz, 'UTC') AS at
),
rows AS (
    SELECT queue, fair_key, hour, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms, encode_cpu_ms, store_cpu_ms,
           bytes_fetched, bytes_stored, store_hits
    FROM halcyon.usage
    WHERE hour >= (SELECT at FROM since) AND ($4::text IS NULL OR queue = $4::text)
    UNION ALL
    SELECT queue, coalesce(fair_key, ''), date_trunc('hour', at, 'UTC'), succeeded, failed, cancelled, retried, decode_cpu_ms,
           process_cpu_ms, encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits
    FROM halcyon.usage_events
    WHERE at >= (SELECT at FROM since) AND ($4::text IS NULL OR queue = $4::text)
)
SELECT queue, CASE WHEN $2::bool THEN fair_key ELSE '' END AS fair_key,
       CASE WHEN $3::bool THEN to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24":00:00Z"') END AS hour,
       sum(succeeded)::bigint AS succeeded, sum(failed)::bigint AS failed, sum(cancelled)::bigint AS cancelled,
       sum(retried)::bigint AS retried, sum(decode_cpu_ms)::float8 AS decode_cpu_ms, sum(process_cpu_ms)::float8 AS process_cpu_ms,
       sum(encode_cpu_ms)::float8 AS encode_cpu_ms, sum(store_cpu_ms)::float8 AS store_cpu_ms,
       sum(bytes_fetched)::bigint AS bytes_fetched, sum(bytes_stored)::bigint AS bytes_stored, sum(store_hits)::bigint AS store_hits
FROM rows
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3;
