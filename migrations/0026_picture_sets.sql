-- Halcyon 0026: picture sets. A job whose chain ends in `breakpoints(…)` stores one image per
-- width and format it chose, and records them here: result_manifest, a JSON object with
-- "rungs" (each {"width", "height", "format", "bytes", "score", "quality", "path"}, by format in
-- the step's order, narrowest first), "srcset" (one per format), "picture" (a <picture> element)
-- and "sizes". result_* describe the set's last rung: the fallback format's largest.
-- Its size is bounded by what makes it (80 rungs at most, the `picture` option's fields of at most
-- 512 and 1,024 bytes: about 150 kB at worst); the check holds it to 256 KiB.
-- Additive: existing rows keep NULL; the check is NOT VALID (NULL in every existing row, so no
-- scan under the lock).
ALTER TABLE halcyon.jobs ADD COLUMN IF NOT EXISTS result_manifest jsonb;

ALTER TABLE halcyon.jobs
    ADD CONSTRAINT jobs_result_manifest_shape
        CHECK (jsonb_typeof(result_manifest) = 'object' AND jsonb_typeof(result_manifest -> 'rungs') = 'array'
               AND jsonb_array_length(result_manifest -> 'rungs') BETWEEN 1 AND 80
               AND octet_length(result_manifest::text) <= 262144) NOT VALID;

COMMENT ON COLUMN halcyon.jobs.result_manifest IS 'a picture set''s images (rungs: width, height, format, bytes, score, quality, path), srcset per format, picture (HTML) and sizes; NULL for any other job';

-- The finished notification of a success, with a picture set's rung count ("rungs": a number,
-- only for a set): 0014's payload plus it. A new signature beside the old one,
-- which failures and cancellations (the trigger) and workers not yet upgraded keep calling.
CREATE FUNCTION halcyon.finished_payload(id bigint, state halcyon.job_state, queue text, cache_hit boolean,
                                         result_key text, result_path text, code text,
                                         result_quality smallint, result_score real, rungs int) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT '{"id": ' || id || ', "state": "' || state || '", "queue": "' || queue
        || '", "cache_hit": ' || coalesce(cache_hit::text, 'null')
        || ', "result_key": ' || coalesce(to_json(left(result_key, 512))::text, 'null')
        || ', "result_path": ' || coalesce(to_json(left(result_path, 512))::text, 'null')
        || CASE WHEN state = 'succeeded' THEN ', "result_quality": ' || coalesce(result_quality::text, 'null')
                || ', "result_score": ' || coalesce(to_json(result_score)::text, 'null') ELSE '' END
        || CASE WHEN state = 'succeeded' AND rungs IS NOT NULL THEN ', "rungs": ' || rungs ELSE '' END
        || CASE WHEN state = 'failed' THEN ', "code": ' || coalesce(to_json(left(code, 128))::text, 'null') ELSE '' END
        || '}'
$$;

-- Usage bills a picture set for every image it stored (the sum of its rungs' bytes), not only
-- result_bytes (its fallback's largest rung). 0019's function otherwise; the sum is read only
-- for a set's row.
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
        CASE WHEN NOT ok OR hit THEN 0
             WHEN NEW.result_manifest IS NOT NULL THEN
                 coalesce((SELECT sum((r ->> 'bytes')::bigint) FROM jsonb_array_elements(NEW.result_manifest -> 'rungs') AS r), 0)
             ELSE coalesce(NEW.result_bytes, 0) END,
        (ok AND hit)::int);
    RETURN NULL;
END
$$;
