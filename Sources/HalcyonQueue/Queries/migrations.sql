-- Migrations (`halcyon migrate`): the files of migrations/ are applied in one transaction that
-- first takes a transaction-scoped advisory lock, so concurrent runs wait for each other and
-- then find nothing left to do.

-- name: migrationLock :exec
-- The advisory lock held while migrating ("HALC" + 1), a transaction at a time (a
-- transaction-scoped lock holds behind a pooler in transaction mode too).
SELECT pg_advisory_xact_lock(1212238915001);

-- name: createSchema :exec
CREATE SCHEMA IF NOT EXISTS halcyon;

-- name: createMigrationsTable :exec
-- Where applied migrations are recorded.
CREATE TABLE IF NOT EXISTS halcyon.schema_migrations (
    version    int PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: migrationsTableExists :one
-- Whether the schema has been migrated at all.
SELECT to_regclass('halcyon.schema_migrations') IS NOT NULL AS e;

-- name: appliedVersions :many
-- The versions recorded as applied.
SELECT version FROM halcyon.schema_migrations ORDER BY version;

-- name: recordMigration :exec
-- $1 version, $2 name.
INSERT INTO halcyon.schema_migrations (version, name) VALUES ($1::int, $2);
