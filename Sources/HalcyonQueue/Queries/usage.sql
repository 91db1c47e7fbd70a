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
-- One page of usage since $1 (timestamptz, taken back to the start of its hour: usage is kept by
-- the hour): per queue, or per queue and fair key when $2 (bool), per hour too when $3 (bool);
-- of queue $4 only (NULL: every queue) and fair key $5 only (NULL: every key, '' the common
-- share). Rows are ordered by $6 — 'cpu', 'succeeded', 'failed' (cancelled included),
-- 'fetched', 'stored' (largest first) or 'key' — then by queue, fair key and hour, and $7 of
-- them are returned after skipping $8 (kind 'row'). Then one row of kind 'total', the sums of
-- all, whose `rows` is how many rows there are (the others, all but the page, are the total less
-- the page: `JobQueue.usage` subtracts). The rolled-up hours plus the events not rolled up yet, so it is exact at any
-- moment; only the page leaves the database, whatever the number of keys.
--
-- In two passes, so that the cost of 300,000 keys is one hash of the keys with one sum each:
-- `ranked` groups the hours by row with only the measure the page is ordered by, the page is
-- its first $7 after $8, and only the page's rows are summed in full (`page_hours`, `paged`);
-- the totals are one ungrouped sum of the hours. (Summing every column of every row before choosing the page
-- cost twice as much.) `fair_key` is '' for the common share (and when not by key), `hour` the
-- hour's start in UTC (`2026-11-28T01:00:00Z`), NULL when not hourly. Sums are numeric and
-- brought into bigint's range at the end: the tables are anyone's with write access.
WITH since AS (
    SELECT date_trunc('hour', $1::timestamptz, 'UTC') AS at
),
hours AS NOT MATERIALIZED (
    SELECT queue, CASE WHEN $2::bool THEN fair_key ELSE '' END AS fair_key, CASE WHEN $3::bool THEN hour END AS hour, succeeded,
           failed, cancelled, retried, decode_cpu_ms, process_cpu_ms, encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored,
           store_hits
    FROM halcyon.usage
    WHERE hour >= (SELECT at FROM since) AND ($4::text IS NULL OR queue = $4::text) AND ($5::text IS NULL OR fair_key = $5::text)
    UNION ALL
    SELECT queue, CASE WHEN $2::bool THEN coalesce(fair_key, '') ELSE '' END, CASE WHEN $3::bool THEN date_trunc('hour', at, 'UTC') END,
           succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms, encode_cpu_ms, store_cpu_ms, bytes_fetched,
           bytes_stored, store_hits
    FROM halcyon.usage_events
    WHERE at >= (SELECT at FROM since) AND ($4::text IS NULL OR queue = $4::text)
      AND ($5::text IS NULL OR coalesce(fair_key, '') = $5::text)
),
ranked AS MATERIALIZED (
    SELECT queue, fair_key, hour,
           sum(CASE $6::text
                   WHEN 'cpu' THEN decode_cpu_ms + process_cpu_ms + encode_cpu_ms + store_cpu_ms
                   WHEN 'succeeded' THEN succeeded::float8
                   WHEN 'failed' THEN failed::float8 + cancelled::float8
                   WHEN 'fetched' THEN bytes_fetched::float8
                   WHEN 'stored' THEN bytes_stored::float8
               END) AS sort_value
    FROM hours
    GROUP BY 1, 2, 3
),
page AS MATERIALIZED (
    SELECT * FROM ranked
    ORDER BY sort_value DESC NULLS LAST, queue, fair_key, hour
    LIMIT $7::int OFFSET $8::int
),
-- The hours of the page's queues and keys, read once through the primary key (a few index
-- lookups, not a second pass over every hour) whatever the plan around them; by queue, the key
-- is '' and that condition true. (Reports are planned for their parameters:
-- `StatementSettings.reports`.)
page_hours AS MATERIALIZED (
    SELECT * FROM hours
    WHERE queue = ANY (ARRAY(SELECT DISTINCT queue FROM page)) AND fair_key = ANY (ARRAY(SELECT fair_key FROM page))
),
paged AS (
    SELECT p.queue, p.fair_key, p.hour, p.sort_value, sum(h.succeeded) AS succeeded, sum(h.failed) AS failed,
           sum(h.cancelled) AS cancelled, sum(h.retried) AS retried, sum(h.decode_cpu_ms) AS decode_cpu_ms,
           sum(h.process_cpu_ms) AS process_cpu_ms, sum(h.encode_cpu_ms) AS encode_cpu_ms, sum(h.store_cpu_ms) AS store_cpu_ms,
           sum(h.bytes_fetched) AS bytes_fetched, sum(h.bytes_stored) AS bytes_stored, sum(h.store_hits) AS store_hits
    FROM page p
    JOIN page_hours h ON h.queue = p.queue AND h.fair_key = p.fair_key AND h.hour IS NOT DISTINCT FROM p.hour
    GROUP BY 1, 2, 3, 4
),
-- The rows of the page, then the sums of all (`part` orders them).
parts AS (
    SELECT 'row' AS kind, 0 AS part, queue, fair_key, hour, 1::bigint AS rows, succeeded, failed, cancelled, retried, decode_cpu_ms,
           process_cpu_ms, encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits, sort_value
    FROM paged
    UNION ALL
    SELECT 'total', 1, '', '', NULL, (SELECT count(*) FROM ranked), coalesce(sum(succeeded), 0), coalesce(sum(failed), 0),
           coalesce(sum(cancelled), 0), coalesce(sum(retried), 0), coalesce(sum(decode_cpu_ms), 0), coalesce(sum(process_cpu_ms), 0),
           coalesce(sum(encode_cpu_ms), 0), coalesce(sum(store_cpu_ms), 0), coalesce(sum(bytes_fetched), 0),
           coalesce(sum(bytes_stored), 0), coalesce(sum(store_hits), 0), NULL
    FROM hours
)
SELECT kind, queue, fair_key, to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24":00:00Z"') AS hour, rows,
       least(greatest(succeeded, -9223372036854775808), 9223372036854775807)::bigint AS succeeded,
       least(greatest(failed, -9223372036854775808), 9223372036854775807)::bigint AS failed,
       least(greatest(cancelled, -9223372036854775808), 9223372036854775807)::bigint AS cancelled,
       least(greatest(retried, -9223372036854775808), 9223372036854775807)::bigint AS retried,
       decode_cpu_ms::float8 AS decode_cpu_ms, process_cpu_ms::float8 AS process_cpu_ms, encode_cpu_ms::float8 AS encode_cpu_ms,
       store_cpu_ms::float8 AS store_cpu_ms,
       least(greatest(bytes_fetched, -9223372036854775808), 9223372036854775807)::bigint AS bytes_fetched,
       least(greatest(bytes_stored, -9223372036854775808), 9223372036854775807)::bigint AS bytes_stored,
       least(greatest(store_hits, -9223372036854775808), 9223372036854775807)::bigint AS store_hits
FROM parts
ORDER BY part, sort_value DESC NULLS LAST, queue, fair_key, hour;
