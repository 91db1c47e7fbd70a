-- `halcyon status`: what an operator asks first (see also queues.sql, workers.sql and
-- retention.sql). Exact counts: these read the table.

-- name: queueDetail :one
-- Queued jobs: runnable now, scheduled for later, and how long the oldest runnable one waited.
SELECT count(*) FILTER (WHERE run_at <= now()) AS runnable,
       count(*) FILTER (WHERE run_at > now()) AS scheduled,
       extract(epoch FROM now() - min(run_at) FILTER (WHERE run_at <= now()))::float8 AS oldest_age
FROM halcyon.jobs WHERE state = 'queued';

-- name: recentFailures :many
-- The view `halcyon.recent_failures`: failed attempts of the last 24 hours by code.
SELECT code, count, latest_message, last_seen FROM halcyon.recent_failures LIMIT 20;

-- name: throughputWindows :one
-- Jobs finished in the last 1, 5 and 15 minutes.
SELECT count(*) FILTER (WHERE finished_at > now() - interval '1 minute') AS m1,
       count(*) FILTER (WHERE finished_at > now() - interval '5 minutes') AS m5,
       count(*) FILTER (WHERE finished_at > now() - interval '15 minutes') AS m15
FROM halcyon.jobs WHERE finished_at > now() - interval '15 minutes';

-- name: progressCounts :one
-- For progress lines: runnable and running jobs now, and jobs finished since $1 (timestamptz).
-- Each count reads one partial or finished_at index.
SELECT (SELECT count(*) FROM halcyon.jobs WHERE state = 'queued' AND run_at <= now()) AS runnable,
       (SELECT count(*) FROM halcyon.jobs WHERE state = 'running') AS running,
       (SELECT count(*) FROM halcyon.jobs WHERE finished_at >= $1::timestamptz AND state = 'succeeded') AS succeeded,
       (SELECT count(*) FROM halcyon.jobs WHERE finished_at >= $1::timestamptz AND state = 'failed') AS failed;
