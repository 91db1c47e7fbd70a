-- The session: transactions, and the notification channels a connection listens on.

-- name: begin :exec
BEGIN;

-- name: commit :exec
COMMIT;

-- name: rollback :exec
ROLLBACK;

-- name: listenJobs :exec
-- Workers are woken on this channel when jobs may be runnable (an insert, a requeue, a resumed
-- queue).
LISTEN halcyon_jobs;

-- name: listenFinished :exec
-- A job reached `succeeded`, `failed` or `cancelled`; the payload is a small JSON object
-- (`halcyon.finished_payload`).
LISTEN halcyon_job_finished;
