-- Halcyon 0001: the job queue (ARCHITECTURE.md §3). Applied by `halcyon migrate`, which
-- holds an advisory lock, runs this file in a transaction and records it in
-- halcyon.schema_migrations. Never edit an applied migration: add 0002_….

CREATE SCHEMA IF NOT EXISTS halcyon;

CREATE TYPE halcyon.job_state AS ENUM ('queued', 'running', 'succeeded', 'failed', 'cancelled');

-- True when a source has a scheme the worker can fetch: http(s)://, file:/// or data:.
CREATE FUNCTION halcyon.is_valid_source(src text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT src IS NOT NULL
       AND length(btrim(src)) > 0
       AND src ~* '^(https?://[^/?#\s]+|file:///[^\s]*|data:[^,]*,.*)'
$$;

CREATE FUNCTION halcyon.are_valid_sources(srcs text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(bool_and(halcyon.is_valid_source(s)), true) FROM unnest(srcs) AS s
$$;

CREATE TABLE halcyon.jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source           text NOT NULL,
    fallback_sources text[] NOT NULL DEFAULT '{}',
    processors       text NOT NULL DEFAULT '',
    cache_key        text,
    options          jsonb NOT NULL DEFAULT '{}',
    priority         smallint NOT NULL DEFAULT 0,
    state            halcyon.job_state NOT NULL DEFAULT 'queued',
    attempt          int NOT NULL DEFAULT 0,
    max_attempts     int NOT NULL DEFAULT 5,
    run_at           timestamptz NOT NULL DEFAULT now(),
    locked_by        text,
    locked_until     timestamptz,
    result_key       text,
    result_digest    text,
    result_path      text,
    result_bytes     bigint,
    result_width     int,
    result_height    int,
    result_format    text,
    result_source    text,          -- which source (the main one or a fallback) produced the result
    cache_hit        boolean,
    errors           jsonb NOT NULL DEFAULT '[]',
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,

    CONSTRAINT jobs_source_valid CHECK (halcyon.is_valid_source(source)),
    CONSTRAINT jobs_fallback_sources_valid CHECK (halcyon.are_valid_sources(fallback_sources)),
    CONSTRAINT jobs_max_attempts_positive CHECK (max_attempts >= 1),
    CONSTRAINT jobs_attempt_nonnegative CHECK (attempt >= 0),
    CONSTRAINT jobs_options_object CHECK (jsonb_typeof(options) = 'object'),
    CONSTRAINT jobs_errors_array CHECK (jsonb_typeof(errors) = 'array'),
    CONSTRAINT jobs_processors_length CHECK (length(processors) <= 65536),
    CONSTRAINT jobs_running_has_lease CHECK (state <> 'running' OR (locked_by IS NOT NULL AND locked_until IS NOT NULL))
);

COMMENT ON TABLE halcyon.jobs IS 'Image jobs: insert a row (or call halcyon.enqueue) and a halcyon worker processes it.';

-- The claim query reads runnable rows in exactly this order.
CREATE INDEX jobs_runnable_idx ON halcyon.jobs (priority DESC, run_at, id) WHERE state = 'queued';
-- The rescuer looks for running rows whose lease has ended.
CREATE INDEX jobs_lease_idx ON halcyon.jobs (locked_until) WHERE state = 'running';
-- Throughput, recent failures and prune read finished rows by time.
CREATE INDEX jobs_finished_idx ON halcyon.jobs (finished_at) WHERE finished_at IS NOT NULL;

-- Wake listening workers. One notification per INSERT statement (bulk inserts notify once),
-- and one when a row becomes runnable again (retry, rescue, release).
CREATE FUNCTION halcyon.notify_workers() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('halcyon_jobs', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_notify_insert AFTER INSERT ON halcyon.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION halcyon.notify_workers();

CREATE TRIGGER jobs_notify_requeue AFTER UPDATE OF state ON halcyon.jobs
    FOR EACH ROW WHEN (NEW.state = 'queued' AND OLD.state <> 'queued' AND NEW.run_at <= now())
    EXECUTE FUNCTION halcyon.notify_workers();

-- Enqueue with named arguments: SELECT halcyon.enqueue('https://…', processors => 'resize(320x320)');
CREATE FUNCTION halcyon.enqueue(
    source           text,
    processors       text        DEFAULT '',
    cache_key        text        DEFAULT NULL,
    fallback_sources text[]      DEFAULT '{}',
    options          jsonb       DEFAULT '{}',
    priority         int         DEFAULT 0,
    max_attempts     int         DEFAULT 5,
    run_at           timestamptz DEFAULT now()
) RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO halcyon.jobs (source, processors, cache_key, fallback_sources, options, priority, max_attempts, run_at)
    VALUES (enqueue.source,
            coalesce(enqueue.processors, ''),
            enqueue.cache_key,
            coalesce(enqueue.fallback_sources, '{}'),
            coalesce(enqueue.options, '{}'),
            coalesce(enqueue.priority, 0)::smallint,
            coalesce(enqueue.max_attempts, 5),
            coalesce(enqueue.run_at, now()))
    RETURNING id
$$;

CREATE TABLE halcyon.workers (
    id           text PRIMARY KEY,
    host         text NOT NULL,
    pid          int NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    stopped_at   timestamptz,
    concurrency  int NOT NULL,
    jobs_done    bigint NOT NULL DEFAULT 0,
    jobs_failed  bigint NOT NULL DEFAULT 0
);

-- Every state with its count, zero included.
CREATE VIEW halcyon.job_counts AS
SELECT s.state, count(j.id) AS count
FROM unnest(enum_range(NULL::halcyon.job_state)) AS s(state)
LEFT JOIN halcyon.jobs j ON j.state = s.state
GROUP BY s.state
ORDER BY s.state;

-- Failed attempts of the last 24 hours by error code.
CREATE VIEW halcyon.recent_failures AS
SELECT e->>'code' AS code,
       count(*) AS count,
       (array_agg(e->>'message' ORDER BY (e->>'at')::timestamptz DESC))[1] AS latest_message,
       max((e->>'at')::timestamptz) AS last_seen
FROM halcyon.jobs j
CROSS JOIN LATERAL jsonb_array_elements(j.errors) AS e
WHERE j.last_error IS NOT NULL
  AND (e->>'at')::timestamptz > now() - interval '24 hours'
GROUP BY e->>'code'
ORDER BY count(*) DESC;

-- Finished jobs per minute over the last hour.
CREATE VIEW halcyon.throughput AS
SELECT date_trunc('minute', finished_at) AS minute,
       count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE state = 'failed') AS failed,
       count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
       count(*) AS finished
FROM halcyon.jobs
WHERE finished_at > now() - interval '1 hour'
GROUP BY 1
ORDER BY 1 DESC;
