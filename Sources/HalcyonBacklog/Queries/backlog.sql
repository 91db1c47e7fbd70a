-- The bench's backlog (`Backlog`): a job table as hours of work leave it, written straight into
-- `halcyon.jobs` for the S scenario, the soak and the query-plan tests. Every row's `cache_key`
-- starts with the backlog's prefix, so exactly these rows can be found and deleted.

-- name: addQueues :exec
-- Queues $1 (text[]), if new.
INSERT INTO halcyon.queues (name) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING;

-- name: writeHistory :exec
-- $3 finished rows over the last three hours, cycling through sources $1 (text[]), keys under
-- prefix $2: 98 % succeeded, 2 % failed with an error entry, one in a hundred with a webhook
-- still pending (due tomorrow).
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
                     ($1::text[])[g % cardinality($1::text[]) + 1] AS src) AS x;

-- name: pruneHistory :exec
-- Retention: 70 % of the history under key pattern $1, scattered.
DELETE FROM halcyon.jobs WHERE cache_key LIKE $1 AND id % 10 < 7;

-- name: vacuumJobs :exec
VACUUM halcyon.jobs;

-- name: enqueueBacklog :exec
-- Jobs numbered $6 to $8 - 1: each logical source (number / the chains' count) cycles through
-- sources $1 (text[]) and is enqueued with every chain of $3 (text[]), adjacent ids; keys under
-- prefix $2, one logical source in $9 (2: half) among 200 hot ones; one logical source in $5 names failing source $4
-- instead (null: none), one in $7 waits a day (0: none); 70 % in `default`, 20 % in
-- `thumbnails`, 10 % in `backfill`; one in 19 at priority 1; with $10 > 0, each logical source's
-- jobs carry fair key `tenant-` (number mod $10) (0: no fair keys).
INSERT INTO halcyon.jobs (source, processors, cache_key, queue, priority, run_at, fair_key)
SELECT CASE WHEN $4::text IS NOT NULL AND s % $5::int = 7 % $5::int THEN $4::text
            ELSE ($1::text[])[s % cardinality($1::text[]) + 1] END,
       ($3::text[])[g % cardinality($3::text[]) + 1],
       $2 || CASE WHEN s % $9::int = 0 THEN 'hot-' || ((s / $9::int) % 200) ELSE 'own-' || s END,
       (ARRAY['default', 'default', 'default', 'default', 'default', 'default', 'default',
              'thumbnails', 'thumbnails', 'backfill'])[s % 10 + 1],
       CASE WHEN s % 19 = 0 THEN 1 ELSE 0 END,
       CASE WHEN $7::int > 0 AND s % $7::int = 3 % $7::int THEN now() + interval '1 day' ELSE now() END,
       CASE WHEN $10::int > 0 THEN 'tenant-' || (s % $10::int) END
FROM generate_series($6::int, $8::int - 1) AS g, LATERAL (SELECT g / cardinality($3::text[]) AS s) AS x;

-- fragment: backlogRows
-- The backlog's queued rows: keys matching $1 or $2.
(cache_key LIKE $1 OR cache_key LIKE $2) AND state = 'queued';

-- name: churnClaimed :exec
-- A seventh of the backlog (keys matching $1 or $2) claimed by a worker that then dies …
UPDATE halcyon.jobs SET state = 'running', locked_by = 'halcyon-bench-churn', locked_until = now(), attempt = attempt + 1, started_at = now() WHERE /*backlogRows*/ AND id % 7 = 3;

-- name: churnRescued :exec
-- … and rescued: an attempt spent, a `worker.lease_expired` entry.
UPDATE halcyon.jobs SET state = 'queued', locked_by = NULL, locked_until = NULL,
       errors = errors || jsonb_build_array(jsonb_build_object('at', now(), 'attempt', attempt, 'code', 'worker.lease_expired',
                                                               'message', 'the worker holding it stopped renewing its lease')),
       last_error = 'worker.lease_expired: the worker holding it stopped renewing its lease'
WHERE locked_by = 'halcyon-bench-churn';

-- name: churnRewritten :exec
-- A fifth of the backlog (keys matching $1 or $2) rewritten in place.
UPDATE halcyon.jobs SET priority = priority WHERE /*backlogRows*/ AND id % 5 = 1;

-- name: churnHeld :exec
-- An eleventh of the backlog (keys matching $1 or $2) claimed …
UPDATE halcyon.jobs SET state = 'running', locked_by = 'halcyon-bench-churn', locked_until = now() WHERE /*backlogRows*/ AND id % 11 = 4;

-- name: churnReleased :exec
-- … and released.
UPDATE halcyon.jobs SET state = 'queued', locked_by = NULL, locked_until = NULL WHERE locked_by = 'halcyon-bench-churn';

-- name: analyzeJobs :exec
ANALYZE halcyon.jobs;

-- name: analyzeQueues :exec
ANALYZE halcyon.queues;

-- name: removeBacklog :exec
-- Every row under key pattern $1 (the backlog and what became of it).
DELETE FROM halcyon.jobs WHERE cache_key LIKE $1;
