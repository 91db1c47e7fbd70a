-- Fleet-wide duties (`halcyon.leases`): who does one now. A row with an expiry, not a session
-- advisory lock, so it holds behind a pooler in transaction mode and lapses by itself when its
-- holder dies.

-- name: acquireLease :one
-- Takes lease $1 for holder $2 for $3 seconds when nobody holds it, its holder's time ran out,
-- or $2 holds it already (then it is renewed). Returns a row when $2 holds it.
INSERT INTO halcyon.leases AS l (name, holder, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3::float8))
ON CONFLICT (name) DO UPDATE
SET holder = excluded.holder, expires_at = excluded.expires_at,
    acquired_at = CASE WHEN l.holder = excluded.holder THEN l.acquired_at ELSE now() END
WHERE l.holder = excluded.holder OR l.expires_at < now()
RETURNING holder;

-- name: renewLease :one
-- Extends lease $1 of holder $2 by $3 seconds from now; no row when $2 no longer holds it.
UPDATE halcyon.leases SET expires_at = now() + make_interval(secs => $3::float8)
WHERE name = $1 AND holder = $2
RETURNING name;

-- name: releaseLease :exec
-- Gives lease $1 up, if holder $2 still holds it.
DELETE FROM halcyon.leases WHERE name = $1 AND holder = $2;
