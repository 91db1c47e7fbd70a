-- Retention and store sweeps: deleting old finished rows, and the record `halcyon status`
-- shows of the latest retention run and store sweep.

-- name: pruneBatch :many
-- Deletes up to $3 finished rows in states $1 (text[]) finished more than $2 seconds ago, oldest
-- first, leaving rows whose webhook is still to be delivered. Returns their states.
WITH doomed AS (
    SELECT id FROM halcyon.jobs
    WHERE finished_at < now() - make_interval(secs => $2::float8) AND state::text = ANY($1::text[])
      AND callback_status IS DISTINCT FROM 'pending'
    ORDER BY finished_at
    LIMIT $3::int
    FOR UPDATE SKIP LOCKED
)
DELETE FROM halcyon.jobs j USING doomed WHERE j.id = doomed.id
RETURNING j.state::text;

-- name: recordPrune :exec
-- Records a retention run and keeps 30 days of them. $1 pruned_by, $2 succeeded, $3 failed, $4
-- cancelled, $5 seconds.
WITH old AS (DELETE FROM halcyon.row_prunes WHERE at < now() - interval '30 days')
INSERT INTO halcyon.row_prunes (pruned_by, succeeded, failed, cancelled, seconds)
VALUES ($1, $2::bigint, $3::bigint, $4::bigint, $5::float8);

-- name: latestPrune :one
-- The latest retention run, for `halcyon status`.
SELECT pruned_by, succeeded, failed, cancelled, extract(epoch FROM now() - at)::float8 AS age
FROM halcyon.row_prunes ORDER BY at DESC LIMIT 1;

-- name: recordSweep :exec
-- Records a store sweep and keeps 30 days of them. $1 swept_by, $2 store root, $3 kept files,
-- $4 kept bytes, $5 size limit (null: none), $6 removed files, $7 removed keys, $8 freed bytes,
-- $9 seconds.
WITH old AS (DELETE FROM halcyon.store_sweeps WHERE at < now() - interval '30 days')
INSERT INTO halcyon.store_sweeps (swept_by, store_root, kept_files, kept_bytes, size_limit, removed_files, removed_keys, freed_bytes, seconds)
VALUES ($1, $2, $3::bigint, $4::bigint, $5::bigint, $6::bigint, $7::bigint, $8::bigint, $9::float8);

-- name: latestSweep :one
-- The latest sweep, for `halcyon status` and the dashboard.
SELECT swept_by, store_root, kept_files, kept_bytes, size_limit,
       extract(epoch FROM now() - at)::float8 AS age
FROM halcyon.store_sweeps ORDER BY at DESC LIMIT 1;
