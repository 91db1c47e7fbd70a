-- Job leases: a worker's heartbeat for the claims it holds, and the rescue of claims whose
-- lease ended (their worker died or stalled).

-- name: heartbeatJobs :many
-- Renews the leases of held claims. $1 job ids (bigint[]), $2 their attempts (int[]), $3 worker
-- id, $4 lease seconds. Rows another session has locked (an operator's `SELECT … FOR UPDATE`, a
-- `cancel` in progress) are skipped rather than waited for, so one locked row cannot hold back
-- every other lease. Returns each claim still ours (in the statement's snapshot) with whether
-- its lease was renewed; a claim not returned is no longer ours (cancelled, rescued, or claimed
-- again as a later attempt).
WITH claims AS (
    SELECT * FROM unnest($1::bigint[], $2::int[]) AS c(id, attempt)
), lockable AS (
    SELECT j.id FROM halcyon.jobs j JOIN claims c ON c.id = j.id AND c.attempt = j.attempt
    WHERE j.state = 'running' AND j.locked_by = $3
    FOR UPDATE OF j SKIP LOCKED
), renewed AS (
    UPDATE halcyon.jobs j SET locked_until = now() + make_interval(secs => $4::float8)
    FROM lockable WHERE j.id = lockable.id
    RETURNING j.id
)
SELECT c.id, (r.id IS NOT NULL) AS renewed
FROM claims c
JOIN halcyon.jobs j ON j.id = c.id AND j.attempt = c.attempt AND j.state = 'running' AND j.locked_by = $3
LEFT JOIN renewed r ON r.id = c.id;

-- fragment: rescueSet
-- What a rescue sets on a row whose lease ended: back to `queued` (or `failed` when out of
-- attempts) with a `worker.lease_expired` entry (the latest 50 kept, as in record.sql). Its
-- `source` is the row's source as Swift's `SourceLabel` names it: whole up to 4096 bytes, else
-- its first 64 characters, its size and its SHA-256.
SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'failed' ELSE 'queued' END::halcyon.job_state,
    finished_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
    run_at = now(),
    errors = (CASE WHEN jsonb_array_length(j.errors) >= 50 THEN j.errors - 0 ELSE j.errors END) || jsonb_build_array(jsonb_build_object(
        'at', now(), 'attempt', j.attempt, 'code', 'worker.lease_expired', 'source', CASE WHEN octet_length(j.source) > 4096 THEN left(j.source, 64) || '… (' || octet_length(j.source) || ' bytes, sha256 ' || encode(sha256(convert_to(j.source, 'UTF8')), 'hex') || ')' ELSE j.source END,
        'message', format('worker %s stopped renewing its lease (ended %s)', j.locked_by, j.locked_until))),
    last_error = format('worker.lease_expired: worker %s stopped renewing its lease', j.locked_by),
    locked_by = NULL, locked_until = NULL;

-- name: rescue :many
-- Requeues (or fails, when out of attempts) running jobs whose lease ended. $1 batch size, $2
-- ids to leave out (bigint[]: rows the database refused to rescue a moment ago). Returns each
-- one's id, new state and the worker that held it.
WITH expired AS (
    SELECT id FROM halcyon.jobs
    WHERE state = 'running' AND locked_until < now() AND NOT (id = ANY($2::bigint[]))
    ORDER BY locked_until
    LIMIT $1::int
    FOR UPDATE SKIP LOCKED
)
UPDATE halcyon.jobs j
/*rescueSet*/
FROM expired
WHERE j.id = expired.id
RETURNING j.id, j.state::text;

-- name: expiredLeases :many
-- The running rows whose lease ended, for a rescue one row at a time. $1 batch size, $2 ids to
-- leave out (bigint[]).
SELECT id FROM halcyon.jobs
WHERE state = 'running' AND locked_until < now() AND NOT (id = ANY($2::bigint[]))
ORDER BY locked_until
LIMIT $1::int;

-- name: rescueOne :one
-- `rescue` for one row. $1 id.
UPDATE halcyon.jobs j
/*rescueSet*/
WHERE j.id = $1::bigint AND j.state = 'running' AND j.locked_until < now()
RETURNING j.id, j.state::text;
