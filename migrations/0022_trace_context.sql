-- Halcyon 0022: the enqueuer's trace context, carried on the row. An application that enqueues a
-- job while handling a traced request passes its W3C Trace Context (https://www.w3.org/TR/trace-context/)
-- with it; the worker's log lines about the job carry its trace id. Additive: existing rows keep
-- NULLs.
--
-- traceparent: `version-trace_id-parent_id-flags` in lowercase hex, as the `traceparent` HTTP
-- header carries it: version 00 is exactly 55 characters; a later version (01–fe) may append
-- `-…` fields, up to 512 characters in all; version ff, an all-zero trace id or an all-zero
-- parent id is invalid, as the specification says.
-- tracestate: the vendors' list that travels beside it (`key=value` members separated by commas,
-- at most 32 of them and 512 bytes in all), only with a traceparent.

-- True for a traceparent the W3C Trace Context specification accepts (NULL for NULL).
CREATE FUNCTION halcyon.is_valid_traceparent(value text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT octet_length(value) <= 512
       AND value ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[\x21-\x7e]*)?$'
       AND left(value, 2) <> 'ff'
       AND (left(value, 2) <> '00' OR octet_length(value) = 55)
       AND substr(value, 4, 32) <> '00000000000000000000000000000000'
       AND substr(value, 37, 16) <> '0000000000000000'
$$;

-- True for a tracestate list the specification accepts: at most 32 members (empty ones between
-- commas are allowed and not counted), each `key=value` by Trace Context Level 1's grammar — a
-- simple key (a lowercase letter, then up to 255 lowercase letters, digits and `_-*/`) or a
-- multi-tenant one (`tenant@system`: a lowercase letter or digit and up to 240 more, then a
-- lowercase letter and up to 13 more), a value of printable ASCII but `,` and `=`, not ending in
-- a space — no key twice, and 512 bytes in all.
CREATE FUNCTION halcyon.is_valid_tracestate(value text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT octet_length(value) <= 512
       AND coalesce(bool_and(m ~ '^([a-z][_0-9a-z*/-]{0,255}|[a-z0-9][_0-9a-z*/-]{0,240}@[a-z][_0-9a-z*/-]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$'), true)
       AND count(*) <= 32
       AND count(DISTINCT split_part(m, '=', 1)) = count(*)
    FROM unnest(string_to_array(value, ',')) AS raw(member),
         LATERAL (SELECT btrim(raw.member, E' \t') AS m) AS trimmed
    WHERE m <> ''
$$;

ALTER TABLE halcyon.jobs
    ADD COLUMN traceparent text,
    ADD COLUMN tracestate text,
    -- NULL (most rows) short-circuits the checks, which run on every UPDATE of a row (a traced
    -- row's claim and lease renewals evaluate them). NOT VALID: every existing row holds NULL in
    -- the new columns, so there is nothing to check, and a scan of a large table under this
    -- statement's exclusive lock would hold up the claims; new and updated rows are checked.
    ADD CONSTRAINT jobs_traceparent_format CHECK (traceparent IS NULL OR halcyon.is_valid_traceparent(traceparent)) NOT VALID,
    ADD CONSTRAINT jobs_tracestate_format
        CHECK (tracestate IS NULL OR (traceparent IS NOT NULL AND halcyon.is_valid_tracestate(tracestate))) NOT VALID;

COMMENT ON COLUMN halcyon.jobs.traceparent IS 'the enqueuer''s W3C traceparent (00-<trace id>-<parent id>-<flags>); the worker''s log lines about the job carry its trace id';
COMMENT ON COLUMN halcyon.jobs.tracestate IS 'the enqueuer''s W3C tracestate, carried with its traceparent';

-- The enqueue functions gain `traceparent` and `tracestate`, last (0015's, a new signature each:
-- the old ones go, so that a call naming fewer arguments is not ambiguous between two versions).
-- A malformed value is refused with an error naming the argument, before the insert.
DROP FUNCTION halcyon.enqueue_variants(text, text[], text, text[], jsonb, int, int, timestamptz, text, text[], text);
DROP FUNCTION halcyon.enqueue(text, text, text, text[], jsonb, int, int, timestamptz, text, text, text[], text);
DROP FUNCTION halcyon.enqueue_job(text, text, text, text[], jsonb, int, int, timestamptz, text, text, text[], text);

-- Refuses a malformed trace context with an error naming the argument (`caller`: the function's name).
CREATE FUNCTION halcyon.check_trace_context(caller text, traceparent text, tracestate text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF traceparent IS NOT NULL AND NOT halcyon.is_valid_traceparent(traceparent) THEN
        RAISE EXCEPTION '%: traceparent must be a W3C traceparent (00-<32 hex digits>-<16 hex digits>-<2 hex digits>, lowercase, ids not all zero), not %',
            caller, quote_literal(left(traceparent, 80))
            USING ERRCODE = 'check_violation', HINT = 'pass the traceparent header of the request that enqueues the job, or NULL';
    END IF;
    IF tracestate IS NOT NULL AND traceparent IS NULL THEN
        RAISE EXCEPTION '%: tracestate needs a traceparent', caller USING ERRCODE = 'check_violation';
    END IF;
    IF tracestate IS NOT NULL AND NOT halcyon.is_valid_tracestate(tracestate) THEN
        RAISE EXCEPTION '%: tracestate must be a W3C tracestate (key=value members separated by commas, at most 32, 512 bytes in all), not %',
            caller, quote_literal(left(tracestate, 80))
            USING ERRCODE = 'check_violation';
    END IF;
END
$$;

CREATE FUNCTION halcyon.enqueue_job(
    source           text,
    processors       text        DEFAULT '',
    cache_key        text        DEFAULT NULL,
    fallback_sources text[]      DEFAULT '{}',
    options          jsonb       DEFAULT '{}',
    priority         int         DEFAULT 0,
    max_attempts     int         DEFAULT 5,
    run_at           timestamptz DEFAULT now(),
    queue            text        DEFAULT 'default',
    unique_key       text        DEFAULT NULL,
    tags             text[]      DEFAULT '{}',
    fair_key         text        DEFAULT NULL,
    traceparent      text        DEFAULT NULL,
    tracestate       text        DEFAULT NULL
) RETURNS TABLE (id bigint, inserted boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    found_id bigint;
BEGIN
    IF octet_length(enqueue_job.fair_key) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'halcyon.enqueue: fair_key must be 1 to 200 bytes, not %', octet_length(enqueue_job.fair_key)
            USING ERRCODE = 'check_violation', HINT = 'NULL puts the job in its queue''s common share';
    END IF;
    PERFORM halcyon.check_trace_context('halcyon.enqueue', enqueue_job.traceparent, enqueue_job.tracestate);
    LOOP
        INSERT INTO halcyon.jobs (source, processors, cache_key, fallback_sources, options, priority, max_attempts, run_at,
                                  queue, unique_key, tags, fair_key, traceparent, tracestate)
        VALUES (enqueue_job.source,
                coalesce(enqueue_job.processors, ''),
                enqueue_job.cache_key,
                coalesce(enqueue_job.fallback_sources, '{}'),
                coalesce(enqueue_job.options, '{}'),
                coalesce(enqueue_job.priority, 0)::smallint,
                coalesce(enqueue_job.max_attempts, 5),
                coalesce(enqueue_job.run_at, now()),
                coalesce(enqueue_job.queue, 'default'),
                enqueue_job.unique_key,
                coalesce(enqueue_job.tags, '{}'),
                enqueue_job.fair_key,
                enqueue_job.traceparent,
                enqueue_job.tracestate)
        ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state IN ('queued', 'running') DO NOTHING
        RETURNING halcyon.jobs.id INTO found_id;
        IF found_id IS NOT NULL THEN
            RETURN QUERY SELECT found_id, true;
            RETURN;
        END IF;
        SELECT j.id INTO found_id FROM halcyon.jobs j
        WHERE j.unique_key = enqueue_job.unique_key AND j.state IN ('queued', 'running');
        IF found_id IS NOT NULL THEN
            RETURN QUERY SELECT found_id, false;
            RETURN;
        END IF;
        -- The job holding the key finished between the two statements: insert again.
    END LOOP;
END
$$;

-- The same, returning only the id (new or existing).
CREATE FUNCTION halcyon.enqueue(
    source           text,
    processors       text        DEFAULT '',
    cache_key        text        DEFAULT NULL,
    fallback_sources text[]      DEFAULT '{}',
    options          jsonb       DEFAULT '{}',
    priority         int         DEFAULT 0,
    max_attempts     int         DEFAULT 5,
    run_at           timestamptz DEFAULT now(),
    queue            text        DEFAULT 'default',
    unique_key       text        DEFAULT NULL,
    tags             text[]      DEFAULT '{}',
    fair_key         text        DEFAULT NULL,
    traceparent      text        DEFAULT NULL,
    tracestate       text        DEFAULT NULL
) RETURNS bigint
LANGUAGE sql AS $$
    SELECT e.id FROM halcyon.enqueue_job(source, processors, cache_key, fallback_sources, options, priority,
                                         max_attempts, run_at, queue, unique_key, tags, fair_key, traceparent, tracestate) AS e
$$;

-- One job per preset for one source, in one statement: ids in the order of `presets` (0015's,
-- with the jobs' trace context).
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
    tags             text[]      DEFAULT '{}',
    fair_key         text        DEFAULT NULL,
    traceparent      text        DEFAULT NULL,
    tracestate       text        DEFAULT NULL
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
    PERFORM halcyon.check_trace_context('halcyon.enqueue_variants', enqueue_variants.traceparent, enqueue_variants.tracestate);
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
                                      enqueue_variants.tags, enqueue_variants.fair_key, enqueue_variants.traceparent,
                                      enqueue_variants.tracestate);
    END LOOP;
    RETURN ids;
END
$$;
