-- Halcyon 0015: fair shares between the tenants of a queue, and limits per queue that hold across
-- every worker. Additive: existing rows have no fair key (the queue's common share) and existing
-- queues no limit, and every existing call of halcyon.enqueue, enqueue_job and enqueue_variants
-- keeps working (the new argument comes last, with a default).

-- A job's fair key: whose share of its queue it is taken from (a tenant, a customer, a user).
-- NULL is the queue's common share. Within a queue and priority, claims go round-robin between
-- the keys with runnable jobs, the common share counting as one key.
ALTER TABLE halcyon.jobs
    ADD COLUMN fair_key text,
    ADD CONSTRAINT jobs_fair_key_length CHECK (octet_length(fair_key) BETWEEN 1 AND 200);
COMMENT ON COLUMN halcyon.jobs.fair_key IS
    'the share of its queue the job is taken from (1 to 200 bytes); claims go round-robin between keys; NULL = the queue''s common share';

-- Each key's runnable jobs in claim order (the common share under ''), and each key's running
-- jobs (the fleet-wide limits count them).
CREATE INDEX jobs_fair_idx ON halcyon.jobs (queue, (coalesce(fair_key, '')), priority DESC, run_at, id) WHERE state = 'queued';
CREATE INDEX jobs_running_idx ON halcyon.jobs (queue, (coalesce(fair_key, ''))) WHERE state = 'running';

-- The rotation: one row per (queue, fair key) that has had a queued job, '' for the common share
-- of a queue that has keys. The claim serves the keys with the lowest turn first and gives each
-- key it served (or found without runnable jobs) a new turn from the sequence, so the key goes
-- to the back. A new key has turn 0: its first job goes within the next claim of its queue.
-- A queue without a row here is claimed as before (priority, run_at, id).
CREATE SEQUENCE halcyon.fair_turn_seq;
CREATE TABLE halcyon.fair_turns (
    queue    text NOT NULL,
    fair_key text NOT NULL,
    turn     bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, fair_key)
);
CREATE INDEX fair_turns_order_idx ON halcyon.fair_turns (queue, turn, fair_key);
COMMENT ON TABLE halcyon.fair_turns IS
    'the round-robin between the fair keys of a queue: lowest turn served first; kept by triggers on halcyon.jobs and by the claim';

-- Puts the keys of the rows an INSERT added in their queues' rotation (with the queue's common
-- share, ''), and holds their rows (FOR KEY SHARE) until the transaction ends, so that
-- `forget_idle_fair_keys` cannot remove them in between. Once per statement, over the rows it
-- added: a bulk insert pays one pass over them; rows without a fair key, next to nothing.
CREATE FUNCTION halcyon.register_fair_keys() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    wanted int;
    held int;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM added WHERE fair_key IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    LOOP
        -- In key order, as every insert into it goes: two enqueues of the same new keys wait
        -- for each other in one order, never in a cycle.
        INSERT INTO halcyon.fair_turns (queue, fair_key)
        SELECT DISTINCT a.queue, k.fair_key FROM added a CROSS JOIN LATERAL (VALUES (a.fair_key), ('')) AS k(fair_key)
        WHERE a.fair_key IS NOT NULL
        ORDER BY 1, 2
        ON CONFLICT DO NOTHING;
        SELECT count(*) INTO wanted FROM (
            SELECT DISTINCT a.queue, k.fair_key FROM added a CROSS JOIN LATERAL (VALUES (a.fair_key), ('')) AS k(fair_key)
            WHERE a.fair_key IS NOT NULL) w;
        SELECT count(*) INTO held FROM (
            SELECT 1 FROM halcyon.fair_turns t
            WHERE (t.queue, t.fair_key) IN (SELECT a.queue, k.fair_key FROM added a CROSS JOIN LATERAL (VALUES (a.fair_key), ('')) AS k(fair_key)
                                            WHERE a.fair_key IS NOT NULL)
            FOR KEY SHARE OF t) h;
        -- A key forgotten between the two statements: insert it again.
        EXIT WHEN held = wanted;
    END LOOP;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_register_fair_keys AFTER INSERT ON halcyon.jobs
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION halcyon.register_fair_keys();

-- The same for one row queued again (a retry, a rescue, a release, a transient failure) or moved
-- to another key or queue. Per row, but only such rows call it; its two lookups are by the
-- primary key whatever the table's statistics say (a plan cached while the table was small would
-- otherwise scan it for every row of a bulk retry).
CREATE FUNCTION halcyon.register_fair_key() RETURNS trigger
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    held int;
BEGIN
    LOOP
        INSERT INTO halcyon.fair_turns (queue, fair_key) VALUES (NEW.queue, ''), (NEW.queue, NEW.fair_key) ON CONFLICT DO NOTHING;
        SELECT count(*) INTO held FROM (
            SELECT 1 FROM halcyon.fair_turns WHERE queue = NEW.queue AND fair_key IN (NEW.fair_key, '') FOR KEY SHARE) h;
        EXIT WHEN held = 2;
    END LOOP;
    RETURN NEW;
END
$$;
CREATE TRIGGER jobs_register_fair_key_again BEFORE UPDATE OF state, queue, fair_key ON halcyon.jobs
    FOR EACH ROW WHEN (NEW.fair_key IS NOT NULL AND NEW.state = 'queued'
                       AND (OLD.state <> 'queued' OR OLD.queue <> NEW.queue OR OLD.fair_key IS DISTINCT FROM NEW.fair_key))
    EXECUTE FUNCTION halcyon.register_fair_key();

-- Removes up to max_keys keys without a queued job from the rotation (workers call it now and
-- then). Each is locked first and checked again afterwards (a statement of its own, so it sees a
-- job committed meanwhile); a key an enqueue holds is skipped.
CREATE FUNCTION halcyon.forget_idle_fair_keys(max_keys int DEFAULT 1000) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    k record;
    forgotten int := 0;
BEGIN
    FOR k IN SELECT t.queue, t.fair_key FROM halcyon.fair_turns t
             WHERE t.fair_key <> '' AND NOT EXISTS (
                 SELECT 1 FROM halcyon.jobs j WHERE j.state = 'queued' AND j.queue = t.queue AND coalesce(j.fair_key, '') = t.fair_key)
             LIMIT greatest(max_keys, 0)
    LOOP
        PERFORM 1 FROM halcyon.fair_turns t WHERE t.queue = k.queue AND t.fair_key = k.fair_key FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        DELETE FROM halcyon.fair_turns t WHERE t.queue = k.queue AND t.fair_key = k.fair_key AND NOT EXISTS (
            SELECT 1 FROM halcyon.jobs j WHERE j.state = 'queued' AND j.queue = t.queue AND coalesce(j.fair_key, '') = t.fair_key);
        IF FOUND THEN
            forgotten := forgotten + 1;
        END IF;
    END LOOP;
    -- A queue left with only its common share is claimed as before.
    FOR k IN SELECT t.queue FROM halcyon.fair_turns t
             WHERE t.fair_key = '' AND NOT EXISTS (SELECT 1 FROM halcyon.fair_turns o WHERE o.queue = t.queue AND o.fair_key <> '')
    LOOP
        PERFORM 1 FROM halcyon.fair_turns t WHERE t.queue = k.queue AND t.fair_key = '' FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        DELETE FROM halcyon.fair_turns t WHERE t.queue = k.queue AND t.fair_key = '' AND NOT EXISTS (
            SELECT 1 FROM halcyon.fair_turns o WHERE o.queue = t.queue AND o.fair_key <> '');
    END LOOP;
    RETURN forgotten;
END
$$;

-- Fleet-wide limits of a queue, NULL = none: at most max_running of its jobs running at once
-- across every worker; claims at most max_per_second a second (a token bucket holding one
-- second's worth, at least one claim: `tokens` as of `tokens_at`, NULL = full); at most
-- max_running_per_key running jobs of any one fair key (the common share counting as one key).
-- Changed at any time with an UPDATE or halcyon.set_queue_limits; the next claim obeys them.
ALTER TABLE halcyon.queues
    ADD COLUMN max_running int,
    ADD COLUMN max_per_second double precision,
    ADD COLUMN max_running_per_key int,
    ADD COLUMN tokens double precision,
    ADD COLUMN tokens_at timestamptz,
    ADD CONSTRAINT queues_max_running_range CHECK (max_running BETWEEN 1 AND 1000000),
    -- NaN sorts above every number: refused with infinity.
    ADD CONSTRAINT queues_max_per_second_range CHECK (max_per_second BETWEEN 0.001 AND 100000),
    ADD CONSTRAINT queues_max_running_per_key_range CHECK (max_running_per_key BETWEEN 1 AND 1000000);
COMMENT ON COLUMN halcyon.queues.max_running IS 'at most this many of the queue''s jobs running across every worker (1 to 1,000,000; NULL = no limit)';
COMMENT ON COLUMN halcyon.queues.max_per_second IS 'at most this many claims a second, smoothed by a one-second token bucket (0.001 to 100,000; NULL = no limit)';
COMMENT ON COLUMN halcyon.queues.max_running_per_key IS 'at most this many running jobs of any one fair key (1 to 1,000,000; NULL = no limit)';

-- The claims a queue's bucket allows now: its tokens refilled at `rate` a second since `at`, at
-- most one second's worth (and at least one claim's).
CREATE FUNCTION halcyon.queue_tokens(rate double precision, tokens double precision, since timestamptz) RETURNS double precision
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT least(greatest(rate, 1), coalesce(tokens + greatest(extract(epoch FROM now() - since)::float8, 0) * rate, greatest(rate, 1)))
$$;

-- Sets a queue's three limits at once (an omitted or NULL one: none) and returns the queue's
-- name; the queue is created when no job has used it yet. Refuses values out of range, naming the limit.
CREATE FUNCTION halcyon.set_queue_limits(
    queue               text,
    max_running         int              DEFAULT NULL,
    max_per_second      double precision DEFAULT NULL,
    max_running_per_key int              DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
BEGIN
    IF queue IS NULL OR NOT halcyon.is_valid_queue_name(queue) THEN
        RAISE EXCEPTION 'halcyon.set_queue_limits: % is not a queue name', coalesce(quote_literal(left(queue, 80)), 'NULL')
            USING ERRCODE = 'invalid_parameter_value', HINT = 'a letter or digit, then letters, digits, _ . : or -, 64 at most';
    END IF;
    IF max_running NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'halcyon.set_queue_limits: max_running must be 1 to 1000000 (NULL: no limit), not %', max_running
            USING ERRCODE = 'invalid_parameter_value', HINT = 'to stop a queue''s claims, pause it';
    END IF;
    IF max_per_second = 'NaN' OR max_per_second NOT BETWEEN 0.001 AND 100000 THEN
        RAISE EXCEPTION 'halcyon.set_queue_limits: max_per_second must be 0.001 to 100000 (NULL: no limit), not %', max_per_second
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_running_per_key NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'halcyon.set_queue_limits: max_running_per_key must be 1 to 1000000 (NULL: no limit), not %', max_running_per_key
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO halcyon.queues AS q (name, max_running, max_per_second, max_running_per_key)
    VALUES (queue, max_running, max_per_second, max_running_per_key)
    ON CONFLICT ON CONSTRAINT queues_pkey DO UPDATE
        SET max_running = EXCLUDED.max_running, max_per_second = EXCLUDED.max_per_second,
            max_running_per_key = EXCLUDED.max_running_per_key, tokens = NULL, tokens_at = NULL;
    -- Claims may have been waiting for a limit that is now higher.
    PERFORM pg_notify('halcyon_jobs', '');
    RETURN queue;
END
$$;

-- The enqueue functions gain `fair_key`, last. (A new argument needs a new signature: the old
-- ones go, so that a call naming fewer arguments is not ambiguous between two versions.)
DROP FUNCTION halcyon.enqueue_variants(text, text[], text, text[], jsonb, int, int, timestamptz, text, text[]);
DROP FUNCTION halcyon.enqueue(text, text, text, text[], jsonb, int, int, timestamptz, text, text, text[]);
DROP FUNCTION halcyon.enqueue_job(text, text, text, text[], jsonb, int, int, timestamptz, text, text, text[]);

-- Enqueue, saying whether a row was inserted: with a unique_key held by a queued or running
-- job, that job's id comes back with inserted = false.
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
    fair_key         text        DEFAULT NULL
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
    LOOP
        INSERT INTO halcyon.jobs (source, processors, cache_key, fallback_sources, options, priority, max_attempts, run_at,
                                  queue, unique_key, tags, fair_key)
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
                enqueue_job.fair_key)
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
    fair_key         text        DEFAULT NULL
) RETURNS bigint
LANGUAGE sql AS $$
    SELECT e.id FROM halcyon.enqueue_job(source, processors, cache_key, fallback_sources, options, priority,
                                         max_attempts, run_at, queue, unique_key, tags, fair_key) AS e
$$;

-- One job per preset for one source, in one statement: ids in the order of `presets` (0009's,
-- with the jobs' fair key).
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
    fair_key         text        DEFAULT NULL
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
                                      enqueue_variants.tags, enqueue_variants.fair_key);
    END LOOP;
    RETURN ids;
END
$$;
