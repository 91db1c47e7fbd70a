-- Workers (`halcyon.workers`): registration, heartbeats, the supervisor's view of what a
-- worker holds, and the list `status` and the dashboard show.

-- name: registerWorker :exec
-- $1 id, $2 host, $3 pid, $4 concurrency. A worker id seen before starts afresh.
INSERT INTO halcyon.workers (id, host, pid, concurrency)
VALUES ($1, $2, $3::int, $4::int)
ON CONFLICT (id) DO UPDATE
SET host = EXCLUDED.host, pid = EXCLUDED.pid, concurrency = EXCLUDED.concurrency,
    started_at = now(), heartbeat_at = now(), stopped_at = NULL;

-- name: heartbeatWorker :exec
-- $1 id, $2 jobs done since the last heartbeat, $3 jobs failed since the last heartbeat.
UPDATE halcyon.workers
SET heartbeat_at = now(), jobs_done = jobs_done + $2::bigint, jobs_failed = jobs_failed + $3::bigint
WHERE id = $1;

-- name: stopWorker :exec
-- $1 id.
UPDATE halcyon.workers SET stopped_at = now(), heartbeat_at = now() WHERE id = $1;

-- name: heldJobs :many
-- $1 worker id. The jobs a worker holds, each with how many times an image process died while
-- it was in processing (its `worker.crashed` entries, but for those where it was a bystander
-- of another job's kill) and its claim's stamp (claim.sql).
SELECT id, attempt,
       (SELECT count(*) FROM jsonb_array_elements(j.errors) e
        WHERE e->>'code' = 'worker.crashed' AND e->'bystander' IS DISTINCT FROM 'true'::jsonb) AS crashes,
       to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS claimed_at
FROM halcyon.jobs j
WHERE state = 'running' AND locked_by = $1
ORDER BY id;

-- name: recordRestart :exec
-- $1 worker id, $2 what ended the image process.
UPDATE halcyon.workers
SET restarts = restarts + 1, last_crash = left($2, 1000), crashed_at = now(), heartbeat_at = now()
WHERE id = $1;

-- name: workerList :many
-- $1 seconds without a heartbeat after which a worker counts as dead. Workers stopped within
-- the hour too, the 50 latest heard from.
SELECT id, host, pid, concurrency, jobs_done, jobs_failed, restarts, last_crash,
       extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age,
       CASE WHEN stopped_at IS NOT NULL THEN 'stopped'
            WHEN heartbeat_at > now() - make_interval(secs => $1::float8) THEN 'live'
            ELSE 'dead' END AS status
FROM halcyon.workers
WHERE stopped_at IS NULL OR stopped_at > now() - interval '1 hour'
ORDER BY heartbeat_at DESC
LIMIT 50;
