-- Halcyon 0009: halcyon.enqueue_variants refuses a NULL among its preset names.

-- One job per preset for one source, in one statement: ids in the order of `presets`. The
-- jobs are inserted together (consecutive ids, one source), so a worker claims them together
-- and decodes the source once. A name that is not a preset — or a NULL, which used to become
-- an empty (pass-through) chain — fails the whole call.
CREATE OR REPLACE FUNCTION halcyon.enqueue_variants(
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
    IF array_position(enqueue_variants.presets, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'halcyon.enqueue_variants: preset % of the array is NULL', array_position(enqueue_variants.presets, NULL)
            USING ERRCODE = 'null_value_not_allowed';
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
