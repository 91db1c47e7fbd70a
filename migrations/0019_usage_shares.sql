-- Halcyon 0019: usage bills each job its share of what its group spent. Jobs of one source share
-- one download and one decode; a worker splits them evenly among the jobs and writes each job's
-- share in its `timings` (`fetched_bytes`, `decode_cpu_ms`), and a failed attempt's timings
-- carry what it spent up to the failure (a deadline, a crash). The usage trigger now bills the
-- bytes from `fetched_bytes`, for every outcome that wrote it — failures included — and keeps
-- `source_bytes` for what it is: a fact about the source. Timings written without it (a worker
-- of an earlier version) are billed as before: a success's source bytes unless it was a store hit.

CREATE OR REPLACE FUNCTION halcyon.record_usage() RETURNS trigger
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
        CASE WHEN t ? 'fetched_bytes' THEN greatest(round((t ->> 'fetched_bytes')::float8), 0)::bigint
             WHEN ok AND NOT hit THEN coalesce(NEW.source_bytes, 0)
             ELSE 0 END,
        CASE WHEN ok AND NOT hit THEN coalesce(NEW.result_bytes, 0) ELSE 0 END,
        (ok AND hit)::int);
    RETURN NULL;
END
$$;
