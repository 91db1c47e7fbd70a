-- Usage per queue and fair key (migrations/0016_usage.sql): the roll-up of the events the
-- `jobs_record_usage` trigger appends, its retention, and what `halcyon usage` and the
-- dashboard read. Hours are UTC.

-- name: rollUpUsage :one
-- Moves up to $1 events (any, skipping those another roll-up holds) into their hours of
-- halcyon.usage, and adds them to the totals of every built window whose hours they fall in
-- (halcyon.usage_totals, counting an hour row it created as one more hour), in one statement:
-- an event is counted once. Run after `lockUsageWindows` in its transaction: one roll-up or
-- window move at a time reads the hours and writes the totals (two at once run one after the
-- other and take different events). Every join is of a table, through its key, never of two
-- of the statement's own results, whose sizes the planner cannot know (a plan comparing every
-- pair of 50,000 rows runs for hours). Returns how many events moved and how many hours they
-- touched.
WITH taken AS (
    SELECT ctid AS row_id FROM halcyon.usage_events LIMIT $1::int FOR UPDATE SKIP LOCKED
),
moved AS (
    DELETE FROM halcyon.usage_events e USING taken WHERE e.ctid = taken.row_id
    RETURNING e.*
),
grouped AS MATERIALIZED (
    SELECT queue, coalesce(fair_key, '') AS fair_key, date_trunc('hour', at, 'UTC') AS hour, sum(succeeded) AS succeeded,
           sum(failed) AS failed, sum(cancelled) AS cancelled, sum(retried) AS retried, sum(decode_cpu_ms) AS decode_cpu_ms,
           sum(process_cpu_ms) AS process_cpu_ms, sum(encode_cpu_ms) AS encode_cpu_ms, sum(store_cpu_ms) AS store_cpu_ms,
           sum(bytes_fetched) AS bytes_fetched, sum(bytes_stored) AS bytes_stored, sum(store_hits) AS store_hits
    FROM moved
    GROUP BY 1, 2, 3
),
-- Whether each hour is new to halcyon.usage (looked up key by key).
hours_new AS MATERIALIZED (
    SELECT g.*, NOT EXISTS (SELECT 1 FROM halcyon.usage u WHERE u.queue = g.queue AND u.fair_key = g.fair_key AND u.hour = g.hour)
                    AS created
    FROM grouped g
),
rolled AS (
    INSERT INTO halcyon.usage AS u (queue, fair_key, hour, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms,
                                    encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits)
    SELECT queue, fair_key, hour, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms, encode_cpu_ms, store_cpu_ms,
           bytes_fetched, bytes_stored, store_hits
    FROM grouped
    ON CONFLICT (queue, fair_key, hour) DO UPDATE
    SET succeeded = u.succeeded + excluded.succeeded, failed = u.failed + excluded.failed,
        cancelled = u.cancelled + excluded.cancelled, retried = u.retried + excluded.retried,
        decode_cpu_ms = u.decode_cpu_ms + excluded.decode_cpu_ms, process_cpu_ms = u.process_cpu_ms + excluded.process_cpu_ms,
        encode_cpu_ms = u.encode_cpu_ms + excluded.encode_cpu_ms, store_cpu_ms = u.store_cpu_ms + excluded.store_cpu_ms,
        bytes_fetched = u.bytes_fetched + excluded.bytes_fetched, bytes_stored = u.bytes_stored + excluded.bytes_stored,
        store_hits = u.store_hits + excluded.store_hits
    RETURNING 1
),
-- What the moved events add to each built window's keys: their sums, the hours new to the table,
-- and whether the window has the key (`known`, looked up key by key).
adding AS MATERIALIZED (
    SELECT w.period, g.queue, g.fair_key,
           EXISTS (SELECT 1 FROM halcyon.usage_totals t WHERE t.period = w.period AND t.queue = g.queue AND t.fair_key = g.fair_key)
               AS known,
           count(*) FILTER (WHERE g.created) AS hours, sum(g.succeeded) AS succeeded,
           sum(g.failed) AS failed, sum(g.cancelled) AS cancelled, sum(g.retried) AS retried, sum(g.decode_cpu_ms) AS decode_cpu_ms,
           sum(g.process_cpu_ms) AS process_cpu_ms, sum(g.encode_cpu_ms) AS encode_cpu_ms, sum(g.store_cpu_ms) AS store_cpu_ms,
           sum(g.bytes_fetched) AS bytes_fetched, sum(g.bytes_stored) AS bytes_stored, sum(g.store_hits) AS store_hits
    FROM hours_new g
    JOIN halcyon.usage_windows w ON g.hour >= w.since
    GROUP BY 1, 2, 3
),
-- Added to the keys a window has, inserted for the others: an update and an insert rather than
-- an upsert, which costs several times as much a row (the lock makes this the only writer).
added AS (
    UPDATE halcyon.usage_totals t
    SET hours = t.hours + a.hours, succeeded = t.succeeded + a.succeeded, failed = t.failed + a.failed,
        cancelled = t.cancelled + a.cancelled, retried = t.retried + a.retried, decode_cpu_ms = t.decode_cpu_ms + a.decode_cpu_ms,
        process_cpu_ms = t.process_cpu_ms + a.process_cpu_ms, encode_cpu_ms = t.encode_cpu_ms + a.encode_cpu_ms,
        store_cpu_ms = t.store_cpu_ms + a.store_cpu_ms, bytes_fetched = t.bytes_fetched + a.bytes_fetched,
        bytes_stored = t.bytes_stored + a.bytes_stored, store_hits = t.store_hits + a.store_hits
    FROM adding a
    WHERE a.known AND t.period = a.period AND t.queue = a.queue AND t.fair_key = a.fair_key
    RETURNING 1
),
inserted AS (
    INSERT INTO halcyon.usage_totals (period, queue, fair_key, hours, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms,
                                      encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits)
    SELECT period, queue, fair_key, hours, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms, encode_cpu_ms,
           store_cpu_ms, bytes_fetched, bytes_stored, store_hits
    FROM adding
    WHERE NOT known
    RETURNING 1
),
-- And to the window's sums per queue, with the keys new to it.
summed AS (
    INSERT INTO halcyon.usage_window_sums AS s (period, queue, keys, succeeded, failed, cancelled, retried, decode_cpu_ms,
                                                process_cpu_ms, encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits)
    SELECT a.period, a.queue, count(*) FILTER (WHERE NOT a.known), sum(a.succeeded), sum(a.failed), sum(a.cancelled), sum(a.retried),
           sum(a.decode_cpu_ms), sum(a.process_cpu_ms), sum(a.encode_cpu_ms), sum(a.store_cpu_ms), sum(a.bytes_fetched),
           sum(a.bytes_stored), sum(a.store_hits)
    FROM adding a
    GROUP BY 1, 2
    ON CONFLICT (period, queue) DO UPDATE
    SET keys = s.keys + excluded.keys, succeeded = s.succeeded + excluded.succeeded, failed = s.failed + excluded.failed,
        cancelled = s.cancelled + excluded.cancelled, retried = s.retried + excluded.retried,
        decode_cpu_ms = s.decode_cpu_ms + excluded.decode_cpu_ms, process_cpu_ms = s.process_cpu_ms + excluded.process_cpu_ms,
        encode_cpu_ms = s.encode_cpu_ms + excluded.encode_cpu_ms, store_cpu_ms = s.store_cpu_ms + excluded.store_cpu_ms,
        bytes_fetched = s.bytes_fetched + excluded.bytes_fetched, bytes_stored = s.bytes_stored + excluded.bytes_stored,
        store_hits = s.store_hits + excluded.store_hits
    RETURNING 1
)
-- (`added`, `inserted` and `summed` run whether read or not, as every data-modifying WITH does.)
SELECT (SELECT count(*) FROM moved) AS events, (SELECT count(*) FROM rolled) AS hours;

-- name: pruneUsage :one
-- Deletes up to $2 hours of usage that ended more than $1 seconds ago — never an hour a built
-- window counts (its totals would no longer be its hours' sums). Returns how many went.
WITH doomed AS (
    SELECT ctid AS row_id FROM halcyon.usage
    WHERE hour < now() - make_interval(secs => $1::float8) - interval '1 hour'
      AND hour < coalesce((SELECT min(since) FROM halcyon.usage_windows), 'infinity')
    LIMIT $2::int
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM halcyon.usage u USING doomed WHERE u.ctid = doomed.row_id
    RETURNING 1
)
SELECT count(*) AS n FROM gone;

-- name: lockUsageWindows :many
-- The first statement of a roll-up's or the windows' upkeep's transaction: the others wait, and
-- any under way has committed before this one's next statement reads the hours or the totals
-- (each statement sees what was committed when it began). Each window's span (seconds), the
-- first hour it counts (`since`, epoch seconds; NULL: not built) and the first hour it should
-- count now (`target`).
SELECT period, extract(epoch FROM span)::float8 AS span, extract(epoch FROM since)::float8 AS since,
       extract(epoch FROM date_trunc('hour', now() - span, 'UTC'))::float8 AS target
FROM halcyon.usage_windows
ORDER BY period
FOR UPDATE;

-- name: clearUsageWindow :one
-- Empties window $1 and marks it not built. Returns how many totals went.
WITH unbuilt AS (
    UPDATE halcyon.usage_windows SET since = NULL WHERE period = $1::text RETURNING 1
),
gone AS (
    DELETE FROM halcyon.usage_totals WHERE period = $1::text RETURNING 1
),
unsummed AS (
    DELETE FROM halcyon.usage_window_sums WHERE period = $1::text RETURNING 1
)
SELECT count(*) AS n FROM gone;

-- name: buildUsageWindow :one
-- Fills window $1, emptied by `clearUsageWindow` earlier in the same transaction, with the sums
-- of the hours from the first hour its span reaches back to, and records that hour. One
-- statement over the window's hours (300,000 keys: about 15 s; it is given longer than other
-- statements). Returns how many totals (queue and fair key) it holds.
WITH window_ AS (
    UPDATE halcyon.usage_windows SET since = date_trunc('hour', now() - span, 'UTC') WHERE period = $1::text
    RETURNING period, since
),
keyed AS MATERIALIZED (
    SELECT w.period, u.queue, u.fair_key, count(*) AS hours, sum(u.succeeded) AS succeeded, sum(u.failed) AS failed,
           sum(u.cancelled) AS cancelled, sum(u.retried) AS retried, sum(u.decode_cpu_ms) AS decode_cpu_ms,
           sum(u.process_cpu_ms) AS process_cpu_ms, sum(u.encode_cpu_ms) AS encode_cpu_ms, sum(u.store_cpu_ms) AS store_cpu_ms,
           sum(u.bytes_fetched) AS bytes_fetched, sum(u.bytes_stored) AS bytes_stored, sum(u.store_hits) AS store_hits
    FROM halcyon.usage u
    JOIN window_ w ON u.hour >= w.since
    GROUP BY 1, 2, 3
),
built AS (
    INSERT INTO halcyon.usage_totals (period, queue, fair_key, hours, succeeded, failed, cancelled, retried, decode_cpu_ms,
                                      process_cpu_ms, encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits)
    SELECT * FROM keyed
    RETURNING 1
),
summed AS (
    INSERT INTO halcyon.usage_window_sums (period, queue, keys, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms,
                                           encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits)
    SELECT period, queue, count(*), sum(succeeded), sum(failed), sum(cancelled), sum(retried), sum(decode_cpu_ms), sum(process_cpu_ms),
        sum(encode_cpu_ms), sum(store_cpu_ms), sum(bytes_fetched), sum(bytes_stored), sum(store_hits)
    FROM keyed
    GROUP BY 1, 2
)
SELECT count(*) AS n FROM built;

-- name: usageWindowAgrees :one
-- Whether window $1's sums per queue (halcyon.usage_window_sums) still count what its hours do:
-- jobs of every outcome and bytes. They stop agreeing when something else writes the hours — a
-- worker of an earlier version rolling up (it knows nothing of the windows), an edit by hand —
-- and the upkeep then builds the window again. One pass over the window's hours; run when the
-- window moves on (once an hour).
WITH window_ AS (
    SELECT since FROM halcyon.usage_windows WHERE period = $1::text
),
hours AS (
    SELECT queue, sum(succeeded) AS succeeded, sum(failed) AS failed, sum(cancelled) AS cancelled, sum(retried) AS retried,
           sum(bytes_fetched) AS bytes_fetched, sum(bytes_stored) AS bytes_stored
    FROM halcyon.usage
    WHERE hour >= (SELECT since FROM window_)
    GROUP BY 1
),
sums AS (
    SELECT queue, succeeded, failed, cancelled, retried, bytes_fetched, bytes_stored
    FROM halcyon.usage_window_sums
    WHERE period = $1::text AND keys > 0
)
SELECT NOT EXISTS (
    (SELECT * FROM hours EXCEPT SELECT * FROM sums) UNION ALL (SELECT * FROM sums EXCEPT SELECT * FROM hours)
) AS agrees;

-- name: analyzeUsageTotals :exec
-- After a window is built: its keys arrived all at once, and the reports' plans need their numbers.
ANALYZE halcyon.usage_totals, halcyon.usage_window_sums;

-- name: slideUsageWindow :one
-- Moves window $1 on to the first hour its span reaches back to now: subtracts the hours that
-- left it from their keys' totals, deleting the totals left with no hour. Returns how many
-- hours left and how many totals went.
WITH window_ AS MATERIALIZED (
    SELECT period, since, date_trunc('hour', now() - span, 'UTC') AS target
    FROM halcyon.usage_windows
    WHERE period = $1::text AND since < date_trunc('hour', now() - span, 'UTC')
),
leaving AS MATERIALIZED (
    SELECT u.queue, u.fair_key, count(*) AS hours, sum(u.succeeded) AS succeeded, sum(u.failed) AS failed,
           sum(u.cancelled) AS cancelled, sum(u.retried) AS retried, sum(u.decode_cpu_ms) AS decode_cpu_ms,
           sum(u.process_cpu_ms) AS process_cpu_ms, sum(u.encode_cpu_ms) AS encode_cpu_ms, sum(u.store_cpu_ms) AS store_cpu_ms,
           sum(u.bytes_fetched) AS bytes_fetched, sum(u.bytes_stored) AS bytes_stored, sum(u.store_hits) AS store_hits
    FROM halcyon.usage u
    JOIN window_ w ON u.hour >= w.since AND u.hour < w.target
    GROUP BY 1, 2
),
gone AS (
    DELETE FROM halcyon.usage_totals t USING leaving l
    WHERE t.period = $1::text AND t.queue = l.queue AND t.fair_key = l.fair_key AND t.hours <= l.hours
    RETURNING t.queue
),
-- The window's sums per queue less the hours that left, and less the keys that went.
unsummed AS (
    UPDATE halcyon.usage_window_sums s
    SET keys = s.keys - coalesce((SELECT count(*) FROM gone g WHERE g.queue = l.queue), 0), succeeded = s.succeeded - l.succeeded,
        failed = s.failed - l.failed, cancelled = s.cancelled - l.cancelled, retried = s.retried - l.retried,
        decode_cpu_ms = s.decode_cpu_ms - l.decode_cpu_ms, process_cpu_ms = s.process_cpu_ms - l.process_cpu_ms,
        encode_cpu_ms = s.encode_cpu_ms - l.encode_cpu_ms, store_cpu_ms = s.store_cpu_ms - l.store_cpu_ms,
        bytes_fetched = s.bytes_fetched - l.bytes_fetched, bytes_stored = s.bytes_stored - l.bytes_stored,
        store_hits = s.store_hits - l.store_hits
    FROM (SELECT queue, sum(succeeded) AS succeeded, sum(failed) AS failed, sum(cancelled) AS cancelled, sum(retried) AS retried,
        sum(decode_cpu_ms) AS decode_cpu_ms, sum(process_cpu_ms) AS process_cpu_ms, sum(encode_cpu_ms) AS encode_cpu_ms,
        sum(store_cpu_ms) AS store_cpu_ms, sum(bytes_fetched) AS bytes_fetched, sum(bytes_stored) AS bytes_stored,
        sum(store_hits) AS store_hits FROM leaving GROUP BY 1) l
    WHERE s.period = $1::text AND s.queue = l.queue
    RETURNING 1
),
kept AS (
    UPDATE halcyon.usage_totals t
    SET hours = t.hours - l.hours, succeeded = t.succeeded - l.succeeded, failed = t.failed - l.failed,
        cancelled = t.cancelled - l.cancelled, retried = t.retried - l.retried, decode_cpu_ms = t.decode_cpu_ms - l.decode_cpu_ms,
        process_cpu_ms = t.process_cpu_ms - l.process_cpu_ms, encode_cpu_ms = t.encode_cpu_ms - l.encode_cpu_ms,
        store_cpu_ms = t.store_cpu_ms - l.store_cpu_ms, bytes_fetched = t.bytes_fetched - l.bytes_fetched,
        bytes_stored = t.bytes_stored - l.bytes_stored, store_hits = t.store_hits - l.store_hits
    FROM leaving l
    WHERE t.period = $1::text AND t.queue = l.queue AND t.fair_key = l.fair_key AND t.hours > l.hours
    RETURNING 1
),
moved AS (
    UPDATE halcyon.usage_windows u SET since = w.target FROM window_ w WHERE u.period = w.period RETURNING 1
)
SELECT coalesce((SELECT sum(hours) FROM leaving), 0)::bigint AS hours, (SELECT count(*) FROM gone) AS totals;

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
-- brought into bigint's range at the end (`halcyon.saturate_bigint`): the tables are anyone's
-- with write access.
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
       halcyon.saturate_bigint(succeeded) AS succeeded, halcyon.saturate_bigint(failed) AS failed,
       halcyon.saturate_bigint(cancelled) AS cancelled, halcyon.saturate_bigint(retried) AS retried,
       decode_cpu_ms::float8 AS decode_cpu_ms, process_cpu_ms::float8 AS process_cpu_ms, encode_cpu_ms::float8 AS encode_cpu_ms,
       store_cpu_ms::float8 AS store_cpu_ms,
       halcyon.saturate_bigint(bytes_fetched) AS bytes_fetched, halcyon.saturate_bigint(bytes_stored) AS bytes_stored,
       halcyon.saturate_bigint(store_hits) AS store_hits
FROM parts
ORDER BY part, sort_value DESC NULLS LAST, queue, fair_key, hour;

-- name: usageTotalsReport :many
-- `usageReport` by queue and fair key, not by the hour, for every key ($1 since, $2 queue or
-- NULL, $3 order, $4 limit, $5 offset): the same rows, read from the totals of the window that
-- counts from $1's hour (halcyon.usage_totals) plus the events not rolled up yet. Returns no
-- row at all when it cannot answer — no built window counts from that hour, or an event's
-- measure is negative (written by hand) — and the caller asks `usageReport`.
--
-- Why a slice of the window's order is enough. Events only add to their keys. Number the keys
-- without events 1, 2, … in the window's order, and let P be the number of keys with events: the
-- key numbered i has at least i - 1 keys before it in the answer (those numbered before it) and
-- at most i - 1 + P. So the keys numbered up to S = $5 - P are all before the page and those
-- after $5 + $4 all after it; the page is among the keys numbered S + 1 … $5 + $4 and the keys
-- with events. Ranked together (with the events added; the same order, the same expression),
-- the page starts after $5 - S of them: a key with events that comes before key S is before the
-- page too (key S is at most at $5), and one after it has exactly S of the skipped keys before it.
-- So a page at offset 100,000 sorts $4 + 2P rows, not 100,000. The total sums the window's
-- per-queue sums (halcyon.usage_window_sums) and the events; its `rows` counts the keys of both.
WITH window_ AS MATERIALIZED (
    SELECT period, since FROM halcyon.usage_windows WHERE since = date_trunc('hour', $1::timestamptz, 'UTC') ORDER BY period LIMIT 1
),
pending AS MATERIALIZED (
    SELECT queue, coalesce(fair_key, '') AS fair_key, sum(succeeded)::numeric AS succeeded, sum(failed)::numeric AS failed,
           sum(cancelled)::numeric AS cancelled, sum(retried)::numeric AS retried, sum(decode_cpu_ms) AS decode_cpu_ms,
           sum(process_cpu_ms) AS process_cpu_ms, sum(encode_cpu_ms) AS encode_cpu_ms, sum(store_cpu_ms) AS store_cpu_ms,
           sum(bytes_fetched)::numeric AS bytes_fetched, sum(bytes_stored)::numeric AS bytes_stored, sum(store_hits)::numeric AS store_hits,
           bool_and(least(succeeded, failed, cancelled, retried, store_hits) >= 0 AND least(bytes_fetched, bytes_stored) >= 0
                    AND least(decode_cpu_ms, process_cpu_ms, encode_cpu_ms, store_cpu_ms) >= 0) AS nonnegative
    FROM halcyon.usage_events
    WHERE at >= (SELECT since FROM window_) AND ($2::text IS NULL OR queue = $2::text)
    GROUP BY 1, 2
),
usable AS MATERIALIZED (
    SELECT EXISTS (SELECT 1 FROM window_) AND coalesce((SELECT bool_and(nonnegative) FROM pending), true)
           AND (SELECT count(*) FROM pending) <= 100000 AS ok
),
-- How many of the window's keys without events in the order asked are certainly before the
-- page: the first $5 less one per key with events (each could be before any of them).
skipped AS MATERIALIZED (
    SELECT greatest($5::int - count(*), 0)::int AS n FROM pending
),
-- The window's keys without events (inlined in each branch below, so that it can use an index).
without_events AS NOT MATERIALIZED (
    SELECT * FROM halcyon.usage_totals t
    WHERE t.period = (SELECT period FROM window_) AND ($2::text IS NULL OR t.queue = $2::text)
      AND (t.queue, t.fair_key) NOT IN (SELECT queue, fair_key FROM pending)
),
-- Their first $5 + $4 in the order asked, numbered, read from that order's index (the
-- migration's; one branch runs: each ORDER BY is its index's expression). A limit known when
-- the statement is planned, so that it is.
first_rows AS MATERIALIZED (
    (SELECT b.*,
                row_number() OVER (ORDER BY b.decode_cpu_ms + b.process_cpu_ms + b.encode_cpu_ms + b.store_cpu_ms DESC, b.queue, b.fair_key)
                AS i
     FROM without_events b
     WHERE $3::text = 'cpu'
     ORDER BY b.decode_cpu_ms + b.process_cpu_ms + b.encode_cpu_ms + b.store_cpu_ms DESC, b.queue, b.fair_key LIMIT $4::int + $5::int)
    UNION ALL
    (SELECT b.*, row_number() OVER (ORDER BY b.succeeded DESC, b.queue, b.fair_key) AS i FROM without_events b
     WHERE $3::text = 'succeeded' ORDER BY b.succeeded DESC, b.queue, b.fair_key LIMIT $4::int + $5::int)
    UNION ALL
    (SELECT b.*, row_number() OVER (ORDER BY b.failed + b.cancelled DESC, b.queue, b.fair_key) AS i FROM without_events b
     WHERE $3::text = 'failed' ORDER BY b.failed + b.cancelled DESC, b.queue, b.fair_key LIMIT $4::int + $5::int)
    UNION ALL
    (SELECT b.*, row_number() OVER (ORDER BY b.bytes_fetched DESC, b.queue, b.fair_key) AS i FROM without_events b
     WHERE $3::text = 'fetched' ORDER BY b.bytes_fetched DESC, b.queue, b.fair_key LIMIT $4::int + $5::int)
    UNION ALL
    (SELECT b.*, row_number() OVER (ORDER BY b.bytes_stored DESC, b.queue, b.fair_key) AS i FROM without_events b
     WHERE $3::text = 'stored' ORDER BY b.bytes_stored DESC, b.queue, b.fair_key LIMIT $4::int + $5::int)
    UNION ALL
    (SELECT b.*, row_number() OVER (ORDER BY b.queue, b.fair_key) AS i FROM without_events b
     WHERE $3::text = 'key' ORDER BY b.queue, b.fair_key LIMIT $4::int + $5::int)
),
-- The keys with events, each with its window's totals (none: zeros; `known`: it has some).
pending_totals AS MATERIALIZED (
    SELECT p.queue, p.fair_key, t.queue IS NOT NULL AS known, coalesce(t.succeeded, 0) + p.succeeded AS succeeded,
           coalesce(t.failed, 0) + p.failed AS failed, coalesce(t.cancelled, 0) + p.cancelled AS cancelled,
           coalesce(t.retried, 0) + p.retried AS retried, coalesce(t.decode_cpu_ms, 0) + p.decode_cpu_ms AS decode_cpu_ms,
           coalesce(t.process_cpu_ms, 0) + p.process_cpu_ms AS process_cpu_ms, coalesce(t.encode_cpu_ms,
               0) + p.encode_cpu_ms AS encode_cpu_ms,
           coalesce(t.store_cpu_ms, 0) + p.store_cpu_ms AS store_cpu_ms, coalesce(t.bytes_fetched, 0) + p.bytes_fetched AS bytes_fetched,
           coalesce(t.bytes_stored, 0) + p.bytes_stored AS bytes_stored, coalesce(t.store_hits, 0) + p.store_hits AS store_hits
    FROM pending p
    LEFT JOIN halcyon.usage_totals t ON t.period = (SELECT period FROM window_) AND t.queue = p.queue AND t.fair_key = p.fair_key
),
-- Those keys from S + 1 on, and the keys with events with them added.
combined AS (
    SELECT queue, fair_key, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms, encode_cpu_ms, store_cpu_ms,
           bytes_fetched, bytes_stored, store_hits
    FROM first_rows
    WHERE i > (SELECT n FROM skipped)
    UNION ALL
    SELECT queue, fair_key, succeeded, failed, cancelled, retried, decode_cpu_ms, process_cpu_ms, encode_cpu_ms, store_cpu_ms,
           bytes_fetched, bytes_stored, store_hits
    FROM pending_totals
),
page AS (
    SELECT *,
           CASE $3::text
               WHEN 'cpu' THEN decode_cpu_ms + process_cpu_ms + encode_cpu_ms + store_cpu_ms
               WHEN 'succeeded' THEN succeeded::float8
               WHEN 'failed' THEN (failed + cancelled)::float8
               WHEN 'fetched' THEN bytes_fetched::float8
               WHEN 'stored' THEN bytes_stored::float8
           END AS sort_value
    FROM combined
    ORDER BY sort_value DESC NULLS LAST, queue, fair_key
    LIMIT $4::int OFFSET $5::int - (SELECT n FROM skipped)
),
-- The sums of the window's keys and of the events, and how many keys each has that the other has not.
window_sums AS (
    SELECT coalesce(sum(keys), 0)::bigint AS rows, coalesce(sum(succeeded), 0) AS succeeded,
           coalesce(sum(failed), 0) AS failed,
           coalesce(sum(cancelled), 0) AS cancelled,
           coalesce(sum(retried), 0) AS retried,
           coalesce(sum(decode_cpu_ms), 0) AS decode_cpu_ms,
           coalesce(sum(process_cpu_ms), 0) AS process_cpu_ms,
           coalesce(sum(encode_cpu_ms), 0) AS encode_cpu_ms,
           coalesce(sum(store_cpu_ms), 0) AS store_cpu_ms,
           coalesce(sum(bytes_fetched), 0) AS bytes_fetched,
           coalesce(sum(bytes_stored), 0) AS bytes_stored,
           coalesce(sum(store_hits), 0) AS store_hits
    FROM halcyon.usage_window_sums
    WHERE period = (SELECT period FROM window_) AND ($2::text IS NULL OR queue = $2::text)
),
pending_sums AS (
    SELECT (SELECT count(*) FROM pending_totals WHERE NOT known) AS rows, coalesce(sum(succeeded), 0) AS succeeded,
           coalesce(sum(failed), 0) AS failed, coalesce(sum(cancelled), 0) AS cancelled,
           coalesce(sum(retried), 0) AS retried, coalesce(sum(decode_cpu_ms), 0) AS decode_cpu_ms,
           coalesce(sum(process_cpu_ms), 0) AS process_cpu_ms, coalesce(sum(encode_cpu_ms), 0) AS encode_cpu_ms,
           coalesce(sum(store_cpu_ms), 0) AS store_cpu_ms, coalesce(sum(bytes_fetched), 0) AS bytes_fetched,
           coalesce(sum(bytes_stored), 0) AS bytes_stored, coalesce(sum(store_hits), 0) AS store_hits
    FROM pending
),
parts AS (
    SELECT 'row' AS kind, 0 AS part, queue, fair_key, 1::bigint AS rows, succeeded, failed, cancelled, retried, decode_cpu_ms,
           process_cpu_ms, encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits, sort_value
    FROM page
    WHERE (SELECT ok FROM usable)
    UNION ALL
    SELECT 'total', 1, '', '', w.rows + p.rows, w.succeeded + p.succeeded, w.failed + p.failed, w.cancelled + p.cancelled,
           w.retried + p.retried, w.decode_cpu_ms + p.decode_cpu_ms, w.process_cpu_ms + p.process_cpu_ms, w.encode_cpu_ms + p.encode_cpu_ms,
           w.store_cpu_ms + p.store_cpu_ms, w.bytes_fetched + p.bytes_fetched, w.bytes_stored + p.bytes_stored, w.store_hits + p.store_hits,
           NULL
    FROM window_sums w, pending_sums p
    WHERE (SELECT ok FROM usable)
)
SELECT kind, queue, fair_key, NULL::text AS hour, rows,
       halcyon.saturate_bigint(succeeded) AS succeeded, halcyon.saturate_bigint(failed) AS failed,
       halcyon.saturate_bigint(cancelled) AS cancelled, halcyon.saturate_bigint(retried) AS retried,
       decode_cpu_ms::float8 AS decode_cpu_ms, process_cpu_ms::float8 AS process_cpu_ms, encode_cpu_ms::float8 AS encode_cpu_ms,
       store_cpu_ms::float8 AS store_cpu_ms,
       halcyon.saturate_bigint(bytes_fetched) AS bytes_fetched, halcyon.saturate_bigint(bytes_stored) AS bytes_stored,
       halcyon.saturate_bigint(store_hits) AS store_hits
FROM parts
ORDER BY part, sort_value DESC NULLS LAST, queue, fair_key;
