-- Halcyon 0006 (issue #18): named presets — a chain (and options) stored once, used by name in
-- any chain as `preset(NAME)`, and `halcyon.enqueue_variants` to enqueue one job per preset.

-- A preset name: a letter or '_', then letters, digits or '_' (the chain grammar's words,
-- which it lowercases), 64 at most.
CREATE FUNCTION halcyon.is_valid_preset_name(name text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT name ~ '^[a-z_][a-z0-9_]{0,63}$'
$$;

CREATE TABLE halcyon.presets (
    name       text PRIMARY KEY CHECK (halcyon.is_valid_preset_name(name)),
    -- A chain without `preset(…)` steps (`halcyon preset set` checks it parses).
    processors text NOT NULL CHECK (octet_length(processors) <= 65536),
    -- Job options the preset brings; a job's own options win key by key.
    options    jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(options) = 'object' AND octet_length(options::text) <= 65536),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE halcyon.presets IS 'named chains: a job''s chain may say preset(NAME); set with halcyon preset set NAME CHAIN';

-- The preset names a chain's text uses (`preset(NAME)` or `preset(name=NAME)`), for the claim.
CREATE FUNCTION halcyon.chain_preset_names(processors text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(DISTINCT m[1]), '{}')
    FROM regexp_matches(lower(processors), 'preset\s*\(\s*(?:name\s*=\s*)?([a-z_][a-z0-9_]*)', 'g') AS m
$$;

-- One job per preset for one source, in one statement: ids in the order of `presets`. The
-- jobs are inserted together (consecutive ids, one source), so a worker claims them together
-- and decodes the source once. A name that is not a preset fails the whole call.
CREATE FUNCTION halcyon.enqueue_variants(
    source           text,
    presets          text[],
    cache_key        text        DEFAULT NULL,
    fallback_sources text[]      DEFAULT '{}',
    options          jsonb       DEFAULT '{}',
    priority         int         DEFAULT 0,
    max_attempts     int         DEFAULT 5,
    run_at           timestamptz DEFAULT now(),
    queue            text        DEFAULT 'default',
    tags             text[]      DEFAULT '{}'
) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
    missing text;
    ids bigint[] := '{}';
    preset text;
BEGIN
    IF coalesce(cardinality(enqueue_variants.presets), 0) NOT BETWEEN 1 AND 32 THEN
        RAISE EXCEPTION 'halcyon.enqueue_variants: give 1 to 32 presets' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT string_agg(quote_literal(n), ', ') INTO missing
    FROM unnest(enqueue_variants.presets) AS n
    WHERE NOT EXISTS (SELECT 1 FROM halcyon.presets p WHERE p.name = n);
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'halcyon.enqueue_variants: no preset named %', missing
            USING ERRCODE = 'invalid_parameter_value', HINT = 'halcyon preset list shows them; halcyon preset set NAME CHAIN adds one';
    END IF;
    FOREACH preset IN ARRAY enqueue_variants.presets LOOP
        ids := ids || halcyon.enqueue(enqueue_variants.source, 'preset(' || preset || ')', enqueue_variants.cache_key,
                                      enqueue_variants.fallback_sources, enqueue_variants.options, enqueue_variants.priority,
                                      enqueue_variants.max_attempts, enqueue_variants.run_at, enqueue_variants.queue, NULL,
                                      enqueue_variants.tags);
    END LOOP;
    RETURN ids;
END
$$;
