-- Claiming: the worker's batch claim, and whether a draining worker is done.
--
-- A claim's stamp (`claimed_at`, `Claim.stamp` in Swift) is its `started_at` as UTC text with
-- microseconds, the same whatever the session's TimeZone and DateStyle, and read back exactly
-- by `::timestamptz`; the statements of record.sql match a claim by it.

-- name: claim :many
-- $1 worker id (text), $2 batch size (int), $3 lease (seconds), $4 most bytes of row text
-- (source, fallbacks, options) to claim at once: rows past it (in claim order) stay queued, but
-- the first is always claimed; $5 the queues to claim from (text[]; empty: every queue) and $6
-- at most how many from each (int[], null: the batch size); $7 whether to claim siblings (bool).
-- Returns the claimed rows in claim order, with each claim's stamp, how long it waited and
-- whether its queue isolates its keys.
--
-- Paused queues, and queues at their limit, are left alone. Each queue is one scan of
-- `jobs_claim_idx`; the batch is the best of them by priority. Then, when $7 is true, its
-- siblings: queued jobs of the same source and queue among the next 16 ids after a chosen one
-- (a source's variants are enqueued together, so their ids are adjacent), at most 16 of them,
-- of rows of at most 64 KiB of text (so that $4 stays near what it says when sources are inline
-- data), in queues without a limit of the worker's own — so a source's jobs are claimed
-- together and decoded once, even when only one slot was free.
--
-- Written so that the planner's estimates stay honest however large and churned the table is
-- (every row count it estimates is bounded by a constant it can see): each queue's scan takes
-- at most the batch size ($2, a constant in the plan, where a per-queue limit read from a join
-- would be guessed at a tenth of the queue); a queue's own limit is applied after (its scan may
-- lock up to $2 rows for the statement's few milliseconds, which other workers skip); the batch
-- is cut at $2; and a sibling search is 16 probes of `jobs_pkey` by value, each id written out
-- (a range on `id` from a join is guessed at 0.5 % of the table).
--
-- The presets a claimed chain names are read by the worker afterwards (presets.sql,
-- `presetsNamed`), once for the batch and only when some chain names one: the chain grammar
-- that finds their names is the worker's.
WITH wanted AS (
    SELECT q.name, least($2::int, coalesce(w.slots, $2::int)) AS slots, w.slots IS NULL AS open, q.isolated_keys
    FROM halcyon.queues q
    LEFT JOIN unnest($5::text[], $6::int[]) AS w(name, slots) ON w.name = q.name
    WHERE NOT q.paused AND (cardinality($5::text[]) = 0 OR w.name IS NOT NULL) AND coalesce(w.slots, $2::int) > 0
), next AS (
    SELECT n.*, w.open, w.slots FROM wanted w CROSS JOIN LATERAL (
        SELECT id, priority, run_at, source, queue,
               octet_length(source) + octet_length(array_to_string(fallback_sources, '')) + octet_length(options::text) AS size
        FROM halcyon.jobs
        WHERE state = 'queued' AND queue = w.name AND run_at <= now()
        ORDER BY priority DESC, run_at, id
        LIMIT $2::int
        FOR UPDATE SKIP LOCKED
    ) n
), allowed AS (
    SELECT * FROM (
        SELECT *, row_number() OVER (PARTITION BY queue ORDER BY priority DESC, run_at, id) AS in_queue FROM next
    ) q
    WHERE in_queue <= slots
), chosen AS (
    SELECT id, source, queue, open, size FROM (
        SELECT id, source, queue, open, size, priority, run_at, sum(size) OVER w AS total, row_number() OVER w AS n
        FROM allowed WINDOW w AS (ORDER BY priority DESC, run_at, id)
    ) sized
    WHERE n = 1 OR total <= $4::bigint
    ORDER BY priority DESC, run_at, id
    LIMIT $2::int
), ids AS (
    SELECT ARRAY(SELECT id FROM chosen) AS chosen
), siblings AS (
    -- Looked for only after a chosen job whose next id is not chosen too (a run of
    -- chosen ids needs one look, at its end), and never locking a chosen row again.
    SELECT DISTINCT s.id FROM ids, chosen c CROSS JOIN LATERAL (
        SELECT j.id FROM halcyon.jobs j
        WHERE j.id = ANY(ARRAY[c.id + 1, c.id + 2, c.id + 3, c.id + 4, c.id + 5, c.id + 6, c.id + 7, c.id + 8, c.id + 9, c.id + 10, c.id + 11, c.id + 12, c.id + 13, c.id + 14, c.id + 15, c.id + 16]) AND j.id <> ALL(ids.chosen)
          AND j.source = c.source AND j.queue = c.queue AND j.state = 'queued' AND j.run_at <= now()
        FOR UPDATE SKIP LOCKED
    ) s
    WHERE $7::bool AND c.open AND c.size <= 65536 AND c.id + 1 <> ALL(ids.chosen)
    LIMIT 16
), claimed AS (
    UPDATE halcyon.jobs j
    SET state = 'running', attempt = j.attempt + 1, locked_by = $1,
        locked_until = now() + make_interval(secs => $3::float8), started_at = now()
    -- By key (jobs_pkey), whatever the planner guesses of the batch's size: a join here
    -- could become a scan of the whole table when its statistics are off.
    WHERE j.id = ANY((SELECT chosen FROM ids) || ARRAY(SELECT id FROM siblings))
    RETURNING j.id, j.source, j.fallback_sources, j.processors, j.cache_key, j.options::text AS options,
              j.priority, j.attempt, j.max_attempts, j.queue, j.run_at, to_char(j.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS claimed_at,
              extract(epoch FROM (now() - j.run_at))::float8 AS queue_wait
)
SELECT id, source, fallback_sources, processors, cache_key, options, priority, attempt, max_attempts, queue, queue_wait, claimed_at,
       (SELECT w.isolated_keys FROM wanted w WHERE w.name = claimed.queue) AS isolated_keys
FROM claimed ORDER BY priority DESC, run_at, id;

-- name: drainCheck :one
-- Whether some job is runnable now in an unpaused queue of $1 (text[]; empty: every queue), and
-- whether any job of those queues is running. Each queue is looked at as the claim reads it (the
-- first entry of `jobs_claim_idx` that is runnable now), so the answer costs a few index probes
-- whether the table holds ten rows or ten million.
SELECT EXISTS (SELECT 1 FROM halcyon.queues q CROSS JOIN LATERAL (
                   SELECT 1 FROM halcyon.jobs j
                   WHERE j.state = 'queued' AND j.queue = q.name AND j.run_at <= now()
                   ORDER BY j.priority DESC, j.run_at, j.id LIMIT 1) r
               WHERE NOT q.paused AND (cardinality($1::text[]) = 0 OR q.name = ANY($1::text[]))) AS runnable,
       EXISTS (SELECT 1 FROM halcyon.jobs
               WHERE state = 'running' AND (cardinality($1::text[]) = 0 OR queue = ANY($1::text[]))
               ORDER BY locked_until LIMIT 1) AS running;
