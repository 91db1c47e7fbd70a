-- Presets (`halcyon.presets`): named chains, and job options they bring.

-- name: setPreset :one
-- $1 name, $2 processors, $3 options (jsonb). Inserts or replaces; returns whether it was new.
INSERT INTO halcyon.presets AS p (name, processors, options) VALUES ($1, $2, $3::jsonb)
ON CONFLICT (name) DO UPDATE SET processors = excluded.processors, options = excluded.options, updated_at = now()
RETURNING (xmax = 0) AS created;

-- name: listPresets :many
-- Every preset, by name.
SELECT name, processors, options::text AS options FROM halcyon.presets ORDER BY name;

-- name: deletePreset :one
-- $1 name. Returns the deleted name.
DELETE FROM halcyon.presets WHERE name = $1 RETURNING name;

-- name: presetsNamed :many
-- The presets of names $1 (text[]), for a claimed batch whose chains name them: the worker finds
-- the names with its chain grammar and reads them in this one statement, right after the claim.
SELECT name, processors, options::text AS options FROM halcyon.presets WHERE name = ANY($1::text[]);
