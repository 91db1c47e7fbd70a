-- Halcyon 0008: leases — one holder at a time for a fleet-wide duty (the store sweep, row
-- retention), held by a row with an expiry rather than a session advisory lock. A session lock
-- does not survive a pooler in transaction mode (PgBouncer's default for most deployments): it
-- stays with whichever server connection took it, its unlock lands on another, and the duty
-- stops for everyone until that connection closes. A lease row holds through any pooler and
-- lapses by itself when its holder dies; the holder renews it while it works.
CREATE TABLE halcyon.leases (
    name        text PRIMARY KEY,
    holder      text NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);

COMMENT ON TABLE halcyon.leases IS 'who does a fleet-wide duty now (store_sweep, row_retention), until expires_at unless renewed';
