-- Named queues (`halcyon.queues`): pausing, resuming, and their counts.

-- name: pauseQueue :one
-- $1 queue name. Returns the queue when it exists.
UPDATE halcyon.queues SET paused = true, paused_at = coalesce(paused_at, now()) WHERE name = $1 RETURNING name;

-- name: resumeQueue :one
-- $1 queue name. Returns the queue when it exists, and wakes listening workers on
-- `halcyon_jobs`, since the queue's jobs are claimable again.
WITH resumed AS (UPDATE halcyon.queues SET paused = false, paused_at = NULL WHERE name = $1 RETURNING name)
SELECT name, pg_notify('halcyon_jobs', '') FROM resumed;

-- name: queueNames :many
-- Every queue's name.
SELECT name FROM halcyon.queues ORDER BY name;

-- name: queueIsolatesKeys :one
-- $1 queue name. Whether the queue keeps its results in a key space of its own (a job's store
-- key is then scoped by the queue's name, as the worker stores it); no row for an unknown queue.
SELECT isolated_keys FROM halcyon.queues WHERE name = $1;

-- name: queueCounts :many
-- Counts by queue and state (every queue, zero counts left out), with whether it is paused and
-- its fleet-wide limits (NULL: none).
SELECT q.name AS queue, q.paused, extract(epoch FROM now() - q.paused_at)::float8 AS paused_for,
       q.max_running, q.max_per_second, q.max_running_per_key,
       j.state::text AS state, count(j.id) AS count
FROM halcyon.queues q LEFT JOIN halcyon.jobs j ON j.queue = q.name
GROUP BY q.name, q.paused, q.paused_at, q.max_running, q.max_per_second, q.max_running_per_key, j.state
ORDER BY q.name, j.state;

-- name: queueLimits :one
-- $1 queue name. Its fleet-wide limits (NULL: none); no row for an unknown queue.
SELECT max_running, max_per_second, max_running_per_key FROM halcyon.queues WHERE name = $1;

-- name: limitedQueues :many
-- The queues with a fleet-wide limit (at most $1 of them, by name), each with its limits and how
-- many of its jobs run now across every worker (counted up to 1,000,000): what workers export
-- as metrics. A queue's running jobs are read from `jobs_running_idx`.
SELECT q.name AS queue, q.max_running, q.max_per_second, q.max_running_per_key,
       (SELECT count(*) FROM (SELECT FROM halcyon.jobs r WHERE r.state = 'running' AND r.queue = q.name LIMIT 1000000) r) AS running
FROM halcyon.queues q
WHERE q.max_running IS NOT NULL OR q.max_per_second IS NOT NULL OR q.max_running_per_key IS NOT NULL
ORDER BY q.name
LIMIT $1::int;

-- name: setQueueLimits :one
-- $1 queue name, $2 max_running (int), $3 max_per_second (float8), $4 max_running_per_key (int),
-- each NULL for none: sets all three (`halcyon.set_queue_limits`, which refuses values out of
-- range and creates the queue when no job has used it yet). Returns the queue's name.
SELECT halcyon.set_queue_limits($1, max_running => $2::int, max_per_second => $3::float8, max_running_per_key => $4::int) AS name;

-- name: forgetIdleFairKeys :one
-- $1 at most how many keys (int). Takes keys without a queued job out of the fair-share rotation
-- (`halcyon.forget_idle_fair_keys`); returns how many went.
SELECT halcyon.forget_idle_fair_keys($1::int) AS forgotten;

-- name: tagCounts :many
-- Counts by state of the jobs tagged $1.
SELECT state::text AS state, count(*) AS count FROM halcyon.jobs WHERE tags @> ARRAY[$1::text] GROUP BY state ORDER BY state;
