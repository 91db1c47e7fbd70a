-- Halcyon 0016: usage per queue and fair key, by the hour — what a tenant costs. Additive: a
-- trigger appends one event per finished attempt to `halcyon.usage_events` (no hot row: nothing
-- is updated in place as jobs finish); workers move the events into the hourly roll-up
-- `halcyon.usage` once a minute (usage.sql's `rollUpUsage`, one worker at a time) and delete
-- hours older than `--retain-usage`. A read sums both tables, so it is exact at any moment.

-- One row per attempt that ended: a job leaving `running` with its attempt kept (succeeded,
-- failed, cancelled, or queued again after a transient failure or an expired lease). A graceful
-- release gives the attempt back and writes nothing. No index: appends stay as cheap as they can
-- be, and the roll-up takes whatever rows it finds.
CREATE TABLE halcyon.usage_events (
    at             timestamptz NOT NULL DEFAULT now(),
    queue          text NOT NULL,
    fair_key       text,
    succeeded      smallint NOT NULL,
    failed         smallint NOT NULL,
    cancelled      smallint NOT NULL,
    retried        smallint NOT NULL,
    decode_cpu_ms  double precision NOT NULL,
    process_cpu_ms double precision NOT NULL,
    encode_cpu_ms  double precision NOT NULL,
    store_cpu_ms   double precision NOT NULL,
    bytes_fetched  bigint NOT NULL,
    bytes_stored   bigint NOT NULL,
    store_hits     smallint NOT NULL
);
-- No key either: its deletes (the roll-up's) are replicated with the whole row, so a logical
-- replication publication of every table does not refuse them.
ALTER TABLE halcyon.usage_events REPLICA IDENTITY FULL;
COMMENT ON TABLE halcyon.usage_events IS
    'one row per finished attempt, appended by a trigger on halcyon.jobs; workers roll them up into halcyon.usage every minute';

-- The hourly roll-up: one row per queue, fair key ('' for the common share) and hour (UTC).
-- CPU milliseconds are double precision: timings have a resolution of 0.1 ms and a small image's
-- stages take less than a millisecond each, which whole milliseconds would lose.
CREATE TABLE halcyon.usage (
    queue          text NOT NULL,
    fair_key       text NOT NULL,
    hour           timestamptz NOT NULL,
    succeeded      bigint NOT NULL DEFAULT 0,
    failed         bigint NOT NULL DEFAULT 0,
    cancelled      bigint NOT NULL DEFAULT 0,
    retried        bigint NOT NULL DEFAULT 0,
    decode_cpu_ms  double precision NOT NULL DEFAULT 0,
    process_cpu_ms double precision NOT NULL DEFAULT 0,
    encode_cpu_ms  double precision NOT NULL DEFAULT 0,
    store_cpu_ms   double precision NOT NULL DEFAULT 0,
    bytes_fetched  bigint NOT NULL DEFAULT 0,
    bytes_stored   bigint NOT NULL DEFAULT 0,
    store_hits     bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, fair_key, hour)
);
CREATE INDEX usage_hour_idx ON halcyon.usage (hour);
COMMENT ON TABLE halcyon.usage IS
    'usage per queue, fair key ('''' = the common share) and hour (UTC): jobs, CPU ms by stage, bytes; rolled up from halcyon.usage_events';

-- Appends the event of one ended attempt. CPU comes from the attempt's timings only when the
-- outcome wrote new ones (a rescue or a cancel writes none: the row's timings are an earlier
-- attempt's). Bytes fetched are a success's source bytes (not a store hit's: nothing was
-- fetched); a failure records no source bytes on the row, so its download is not counted.
CREATE FUNCTION halcyon.record_usage() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    t jsonb := CASE WHEN NEW.timings IS DISTINCT FROM OLD.timings THEN NEW.timings END;
    ok boolean := NEW.state = 'succeeded';
    hit boolean := coalesce(NEW.cache_hit, false);
BEGIN
    INSERT INTO halcyon.usage_events (queue, fair_key, succeeded, failed, cancelled, retried,
        decode_cpu_ms, process_cpu_ms, encode_cpu_ms, store_cpu_ms, bytes_fetched, bytes_stored, store_hits)
    VALUES (NEW.queue, NEW.fair_key, ok::int, (NEW.state = 'failed')::int, (NEW.state = 'cancelled')::int,
        (NEW.state = 'queued')::int,
        coalesce((t ->> 'decode_cpu_ms')::float8, 0), coalesce((t ->> 'process_cpu_ms')::float8, 0),
        coalesce((t ->> 'encode_cpu_ms')::float8, 0), coalesce((t ->> 'store_cpu_ms')::float8, 0),
        CASE WHEN ok AND NOT hit THEN coalesce(NEW.source_bytes, 0) ELSE 0 END,
        CASE WHEN ok AND NOT hit THEN coalesce(NEW.result_bytes, 0) ELSE 0 END,
        (ok AND hit)::int);
    RETURN NULL;
END
$$;
-- The WHEN keeps claims and heartbeats (running stays running) and releases (the attempt given
-- back) free of any call.
CREATE TRIGGER jobs_record_usage AFTER UPDATE OF state ON halcyon.jobs
    FOR EACH ROW WHEN (OLD.state = 'running' AND NEW.state IS DISTINCT FROM 'running' AND NEW.attempt = OLD.attempt)
    EXECUTE FUNCTION halcyon.record_usage();
