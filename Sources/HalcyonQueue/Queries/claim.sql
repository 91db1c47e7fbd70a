-- Claiming: the worker's batch claim, and whether a draining worker is done.
--
-- A claim's stamp (`claimed_at`, `Claim.stamp` in Swift) is its `started_at` as UTC text with
-- microseconds, the same whatever the session's TimeZone and DateStyle, and read back exactly
-- by `::timestamptz`; the statements of record.sql match a claim by it.

-- name: claim :many
-- $1 worker id (text), $2 batch size (int), $3 lease (seconds), $4 most bytes of row text
-- (source, fallbacks, options) to claim at once: rows past it (in claim order) stay queued, but
-- the first is always claimed; $5 the queues to claim from (text[]; empty: every queue) and $6
-- at most how many from each (int[], null: the batch size); $7 whether to claim siblings (bool);
-- $8 which queues: false those without a fleet-wide limit, true those with one (bool) — whose
-- rows the caller has locked first in the same transaction (`lockLimitedQueues`), so that this
-- statement's snapshot counts every claim made before it.
-- Returns the claimed rows by priority, then run_at and id (whichever way the batch was chosen),
-- with each claim's stamp, how long it waited and whether its queue isolates its keys.
--
-- Paused queues, and queues at their limit (the worker's own, or the fleet's: `max_running`
-- minus its running jobs, the claims `max_per_second`'s bucket allows), are left alone. Running
-- jobs are counted up to the limit only (`jobs_running_idx`), so a count costs at most the limit. Each
-- queue is one scan of `jobs_claim_idx`; the batch is the best of them by priority. A queue with
-- fair keys (rows in `halcyon.fair_turns`) is claimed round-robin between its keys at the top
-- priority of that scan: the first $2 + 16 keys in the rotation (not parked) with a runnable job
-- at that priority, looking at 1,000 at most, and up to 16 parked keys whose time came, are
-- served in turn order (those under `max_running_per_key`), an equal share of the batch each
-- (`jobs_fair_idx`), the rest of the batch coming from the scan; then every key served gets a
-- new turn (the back of the rotation: those that got fewer jobs first, so the next claim goes on
-- with the round), and every key looked at without a runnable job is parked, keeping its turn,
-- until its first job's run_at (a minute at most; a second when it waits behind a higher
-- priority) or until a job of its own is queued (the triggers of 0018_idle_keys.sql); the common
-- share is never parked but goes to the back. Rows of keys at `max_running_per_key` are left alone. Then, when $7 is true, its
-- siblings: queued jobs of the same source and queue among the next 16 ids after a chosen one
-- (a source's variants are enqueued together, so their ids are adjacent), at most 16 of them,
-- of rows of at most 64 KiB of text (so that $4 stays near what it says when sources are inline
-- data), in queues without a limit of the worker's own or the fleet's — so a source's jobs are
-- claimed together and decoded once, even when only one slot was free.
--
-- Written so that the planner's estimates stay honest however large and churned the table is
-- (every row count it estimates is bounded by a constant it can see): each queue's scan takes
-- at most the batch size ($2, a constant in the plan, where a per-queue limit read from a join
-- would be guessed at a tenth of the queue); a queue's own limit is applied after (its scan may
-- lock up to $2 rows for the statement's few milliseconds, which other workers skip); the batch
-- is cut at $2; and a sibling search is one scan of `jobs_pkey` for 16 ids, each written out (a
-- range on `id` from a join is guessed at 0.5 % of the table). Its state test is written on the
-- state's text, which implies no partial index's predicate: every other index that could serve
-- it is partial on `state = 'queued'`, and where statistics say (wrongly, just after a burst was
-- inserted) that hardly any row is queued, the planner read such an index instead — the queue's
-- whole `jobs_fair_idx`, 34 ms a claim at 100,000 jobs. So the primary key is the only index it
-- can use, whatever the statistics say.
--
-- The presets a claimed chain names are read by the worker afterwards (presets.sql,
-- `presetsNamed`), once for the batch and only when some chain names one: the chain grammar
-- that finds their names is the worker's.
WITH wanted AS (
    SELECT q.name, q.isolated_keys, q.max_running_per_key AS key_cap, w.slots IS NULL AND NOT $8::bool AS open,
           greatest(0, least($2::int, coalesce(w.slots, $2::int),
               CASE WHEN q.max_running IS NULL THEN $2::int
                    ELSE q.max_running - (SELECT count(*) FROM (SELECT FROM halcyon.jobs r WHERE r.state = 'running' AND r.queue = q.name
                                                                 LIMIT q.max_running) r)::int END,
               CASE WHEN q.max_per_second IS NULL THEN $2::int
                    ELSE floor(halcyon.queue_tokens(q.max_per_second, q.tokens, q.tokens_at))::int END)) AS slots,
           EXISTS (SELECT 1 FROM halcyon.fair_turns t WHERE t.queue = q.name) AS fair
    FROM halcyon.queues q
    LEFT JOIN unnest($5::text[], $6::int[]) AS w(name, slots) ON w.name = q.name
    WHERE NOT q.paused AND (cardinality($5::text[]) = 0 OR w.name IS NOT NULL) AND coalesce(w.slots, $2::int) > 0
      AND (q.max_running IS NOT NULL OR q.max_per_second IS NOT NULL OR q.max_running_per_key IS NOT NULL) = $8::bool
), next AS (
    SELECT n.* FROM wanted w CROSS JOIN LATERAL (
        SELECT id, priority, run_at, source, queue, coalesce(fair_key, '') AS fair_key,
               octet_length(source) + octet_length(array_to_string(fallback_sources, '')) + octet_length(options::text) AS size
        FROM halcyon.jobs
        WHERE state = 'queued' AND queue = w.name AND run_at <= now() AND w.slots > 0
        ORDER BY priority DESC, run_at, id
        LIMIT $2::int
        FOR UPDATE SKIP LOCKED
    ) n
), tops AS (
    -- Each fair queue's top priority, as its scan found it.
    SELECT top.queue, top.priority, w.key_cap
    FROM (SELECT queue, max(priority) AS priority FROM next GROUP BY queue) top
    JOIN wanted w ON w.name = top.queue AND w.fair
), listed AS (
    -- The keys in the rotation (not parked) with a runnable job at that priority: the first
    -- $2 + 16 in turn order, looking at 1,000 at most.
    SELECT k.queue, k.fair_key, k.turn, tp.priority, tp.key_cap
    FROM tops tp CROSS JOIN LATERAL (
        SELECT t.queue, t.fair_key, t.turn FROM (
            SELECT t.queue, t.fair_key, t.turn FROM halcyon.fair_turns t
            WHERE t.queue = tp.queue AND t.parked_until IS NULL ORDER BY t.turn, t.fair_key LIMIT 1000
        ) t
        WHERE (SELECT true FROM halcyon.jobs j
               WHERE j.state = 'queued' AND j.queue = t.queue AND coalesce(j.fair_key, '') = t.fair_key AND j.priority = tp.priority
                 AND j.run_at <= now() LIMIT 1) IS NOT NULL
        LIMIT $2::int + 16
    ) k
), due AS (
    -- Up to 16 parked keys whose time came, and whether they have a runnable job now.
    SELECT t.queue, t.fair_key, t.turn, tp.priority, tp.key_cap,
           (SELECT true FROM halcyon.jobs j
            WHERE j.state = 'queued' AND j.queue = t.queue AND coalesce(j.fair_key, '') = t.fair_key AND j.priority = tp.priority
              AND j.run_at <= now() LIMIT 1) IS NOT NULL AS runnable
    FROM tops tp CROSS JOIN LATERAL (
        SELECT t.queue, t.fair_key, t.turn FROM halcyon.fair_turns t
        WHERE t.queue = tp.queue AND t.parked_until <= now() ORDER BY t.parked_until LIMIT 16
    ) t
), idle AS (
    -- The keys looked at without a runnable job: those of the rotation before its last listed
    -- key (all 1,000 when fewer were listed than asked for), and the due keys still idle.
    SELECT t.queue, t.fair_key
    FROM tops tp
    CROSS JOIN LATERAL (SELECT count(*) AS n FROM listed l WHERE l.queue = tp.queue) b
    LEFT JOIN LATERAL (
        SELECT l.turn, l.fair_key FROM listed l WHERE l.queue = tp.queue ORDER BY l.turn DESC, l.fair_key DESC LIMIT 1
    ) last ON true
    CROSS JOIN LATERAL (
        SELECT t.queue, t.fair_key, t.turn FROM halcyon.fair_turns t
        WHERE t.queue = tp.queue AND t.parked_until IS NULL ORDER BY t.turn, t.fair_key LIMIT 1000
    ) t
    WHERE (b.n < $2::int + 16 OR (t.turn, t.fair_key) < (last.turn, last.fair_key))
      AND (SELECT true FROM halcyon.jobs j
           WHERE j.state = 'queued' AND j.queue = t.queue AND coalesce(j.fair_key, '') = t.fair_key AND j.priority = tp.priority
             AND j.run_at <= now() LIMIT 1) IS NULL
    UNION ALL
    SELECT queue, fair_key FROM due WHERE NOT runnable
), live AS (
    -- The keys to serve, and how many more of theirs may run.
    SELECT k.*, CASE WHEN k.key_cap IS NULL THEN $2::int
                     ELSE k.key_cap - (SELECT count(*) FROM (SELECT FROM halcyon.jobs r
                                                             WHERE r.state = 'running' AND r.queue = k.queue AND coalesce(r.fair_key, '') = k.fair_key
                                                             LIMIT k.key_cap) r)::int END AS key_slots
    FROM (SELECT queue, fair_key, turn, priority, key_cap FROM listed
          UNION ALL
          SELECT queue, fair_key, turn, priority, key_cap FROM due WHERE runnable) k
), served AS (
    -- The first of them, as many as the queue has slots, each an equal share of the slots.
    SELECT s.*, least(s.key_slots, ceil(w.slots::float8 / s.n)::int) AS share FROM (
        SELECT l.*, row_number() OVER (PARTITION BY l.queue ORDER BY l.turn, l.fair_key) AS place, count(*) OVER (PARTITION BY l.queue) AS n
        FROM live l WHERE l.key_slots > 0
    ) s JOIN wanted w ON w.name = s.queue
    WHERE s.place <= w.slots
), picks AS (
    SELECT p.*, s.turn, row_number() OVER (PARTITION BY p.queue, p.fair_key ORDER BY p.run_at, p.id) AS round
    FROM served s CROSS JOIN LATERAL (
        SELECT id, priority, run_at, source, queue, coalesce(fair_key, '') AS fair_key,
               octet_length(source) + octet_length(array_to_string(fallback_sources, '')) + octet_length(options::text) AS size
        FROM halcyon.jobs j
        WHERE j.state = 'queued' AND j.queue = s.queue AND coalesce(j.fair_key, '') = s.fair_key AND j.priority = s.priority
          AND j.run_at <= now()
        ORDER BY j.run_at, j.id
        LIMIT s.share
        FOR UPDATE SKIP LOCKED
    ) p
), candidates AS (
    -- The keys' picks first (round by round, keys in turn order), then the scan's rows.
    SELECT DISTINCT ON (id) * FROM (
        SELECT id, priority, run_at, source, queue, fair_key, size, 0 AS lane, round, turn FROM picks
        UNION ALL
        SELECT id, priority, run_at, source, queue, fair_key, size, 1, 0, 0 FROM next
    ) c
    ORDER BY id, lane
), capped AS (
    SELECT c.*, w.open, w.slots FROM (
        SELECT c.*, row_number() OVER (PARTITION BY c.queue, c.fair_key ORDER BY c.priority DESC, c.lane, c.round, c.turn, c.run_at, c.id) AS in_key
        FROM candidates c
    ) c JOIN wanted w ON w.name = c.queue
    WHERE w.key_cap IS NULL
       OR c.in_key <= w.key_cap - (SELECT count(*) FROM (SELECT FROM halcyon.jobs r
                                                         WHERE r.state = 'running' AND r.queue = c.queue AND coalesce(r.fair_key, '') = c.fair_key
                                                         LIMIT w.key_cap) r)
), allowed AS (
    SELECT * FROM (
        SELECT *, row_number() OVER (PARTITION BY queue ORDER BY priority DESC, lane, round, turn, run_at, id) AS in_queue FROM capped
    ) q
    WHERE in_queue <= slots
), chosen AS (
    SELECT id, source, queue, fair_key, open, size FROM (
        SELECT id, source, queue, fair_key, open, size, priority, lane, round, turn, run_at, sum(size) OVER w AS total, row_number() OVER w AS n
        FROM allowed WINDOW w AS (ORDER BY priority DESC, lane, round, turn, run_at, id)
    ) sized
    WHERE n = 1 OR total <= $4::bigint
    ORDER BY priority DESC, lane, round, turn, run_at, id
    LIMIT $2::int
), ids AS (
    SELECT ARRAY(SELECT id FROM chosen) AS chosen
), siblings AS (
    -- Looked for only after a chosen job whose next id is not chosen too (a run of
    -- chosen ids needs one look, at its end), and never locking a chosen row again.
    SELECT DISTINCT s.id FROM ids, chosen c CROSS JOIN LATERAL (
        SELECT j.id FROM halcyon.jobs j
        WHERE j.id = ANY(ARRAY[c.id + 1, c.id + 2, c.id + 3, c.id + 4, c.id + 5, c.id + 6, c.id + 7, c.id + 8, c.id + 9, c.id + 10, c.id + 11, c.id + 12, c.id + 13, c.id + 14, c.id + 15, c.id + 16]) AND j.id <> ALL(ids.chosen)
          AND j.source = c.source AND j.queue = c.queue AND j.state::text = 'queued' AND j.run_at <= now()
        FOR UPDATE SKIP LOCKED
    ) s
    WHERE $7::bool AND c.open AND c.size <= 65536 AND c.id + 1 <> ALL(ids.chosen)
    LIMIT 16
), claimed AS (
    UPDATE halcyon.jobs j
    SET state = 'running', attempt = least(j.attempt + 1, 1000000), locked_by = $1,
        locked_until = now() + make_interval(secs => $3::float8), started_at = now()
    -- By key (jobs_pkey), whatever the planner guesses of the batch's size: a join here
    -- could become a scan of the whole table when its statistics are off.
    WHERE j.id = ANY((SELECT chosen FROM ids) || ARRAY(SELECT id FROM siblings))
    RETURNING j.id, j.source, j.fallback_sources, j.processors, j.cache_key, j.options::text AS options,
              j.priority, j.attempt, j.max_attempts, j.queue, j.fair_key, j.traceparent, j.tracestate, j.trace_id, j.run_at,
              to_char(j.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS claimed_at,
              extract(epoch FROM (now() - j.run_at))::float8 AS queue_wait
), turned AS (
    -- The keys served go to the back of the rotation: those that got fewer jobs in this claim
    -- first (a batch that ended within a round), so that the next claim goes on with the round
    -- where this one stopped. The common share looked at without a runnable job goes to the
    -- back as well. (A key another claim is turning right now is left to it.)
    UPDATE halcyon.fair_turns t SET turn = b.turn, parked_until = NULL
    FROM (
        SELECT o.queue, o.fair_key, nextval('halcyon.fair_turn_seq') AS turn FROM (
            SELECT k.queue, k.fair_key FROM halcyon.fair_turns k
            JOIN (SELECT queue, coalesce(fair_key, '') AS fair_key, count(*) AS got FROM claimed GROUP BY 1, 2
                  UNION ALL
                  SELECT queue, fair_key, 0 FROM idle WHERE fair_key = '') g ON g.queue = k.queue AND g.fair_key = k.fair_key
            ORDER BY g.got, k.turn, k.fair_key
            FOR NO KEY UPDATE OF k SKIP LOCKED
        ) o
    ) b
    WHERE t.queue = b.queue AND t.fair_key = b.fair_key
), parked AS (
    -- The other keys without a runnable job are parked, keeping their turn, until their first
    -- job's run_at (a minute at most; a second when it waits behind a higher priority), or
    -- until a job of theirs is queued (`register_fair_keys`).
    UPDATE halcyon.fair_turns t SET parked_until = p.until
    FROM (
        SELECT k.queue, k.fair_key,
               CASE WHEN f.run_at IS NULL THEN now() + interval '1 minute'
                    WHEN f.run_at > now() THEN least(f.run_at, now() + interval '1 minute')
                    ELSE now() + interval '1 second' END AS until
        FROM halcyon.fair_turns k
        JOIN idle i ON i.queue = k.queue AND i.fair_key = k.fair_key AND i.fair_key <> ''
                    AND NOT EXISTS (SELECT 1 FROM claimed c WHERE c.queue = i.queue AND coalesce(c.fair_key, '') = i.fair_key)
        LEFT JOIN LATERAL (
            SELECT j.run_at FROM halcyon.jobs j
            WHERE j.state = 'queued' AND j.queue = k.queue AND coalesce(j.fair_key, '') = k.fair_key
            ORDER BY j.priority DESC, j.run_at LIMIT 1
        ) f ON true
        FOR NO KEY UPDATE OF k SKIP LOCKED
    ) p
    WHERE t.queue = p.queue AND t.fair_key = p.fair_key
), spent AS (
    -- The bucket of each rate-limited queue, less this claim's jobs.
    UPDATE halcyon.queues q SET tokens = halcyon.queue_tokens(q.max_per_second, q.tokens, q.tokens_at) - c.n, tokens_at = now()
    FROM (SELECT queue, count(*) AS n FROM claimed GROUP BY queue) c
    WHERE $8::bool AND q.name = c.queue AND q.max_per_second IS NOT NULL
)
SELECT id, source, fallback_sources, processors, cache_key, options, priority, attempt, max_attempts, queue, fair_key, traceparent, tracestate, trace_id, queue_wait, claimed_at,
       (SELECT w.isolated_keys FROM wanted w WHERE w.name = claimed.queue) AS isolated_keys
FROM claimed ORDER BY priority DESC, run_at, id;

-- name: lockLimitedQueues :many
-- $1 the queues a worker claims from (text[]; empty: every queue). Locks the rows of those with
-- a fleet-wide limit that are not paused, in name order, until the transaction ends: the claim
-- that follows ($8 true) then sees every claim of them made before it, and no other worker
-- claims from them until it commits. Returns their names (none: nothing to claim there).
SELECT name FROM halcyon.queues
WHERE NOT paused AND (max_running IS NOT NULL OR max_per_second IS NOT NULL OR max_running_per_key IS NOT NULL)
  AND (cardinality($1::text[]) = 0 OR name = ANY($1::text[]))
ORDER BY name
FOR UPDATE;

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
