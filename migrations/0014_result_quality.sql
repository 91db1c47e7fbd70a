-- What a result's encoding reached: the encoder quality the stored bytes were written with (after
-- a max_bytes search, the one it settled on) and their perceptual score (SSIMULACRA2 of the stored
-- bytes against the chain's own pixels, 0–100, two decimals). Written by the worker with the
-- result; NULL when unknown (a format without a quality such as png or gif, no score computed,
-- rows finished before). Additive: existing rows keep NULLs.
ALTER TABLE halcyon.jobs
    ADD COLUMN result_quality smallint,
    ADD COLUMN result_score   real,
    ADD CONSTRAINT jobs_result_quality_range CHECK (result_quality BETWEEN 1 AND 100),
    -- NaN sorts above every number in PostgreSQL: refused here too.
    ADD CONSTRAINT jobs_result_score_range CHECK (result_score BETWEEN 0 AND 100);

COMMENT ON COLUMN halcyon.jobs.result_quality IS 'the encoder quality (1-100) the result was written with; NULL for a format without one (png, gif)';
COMMENT ON COLUMN halcyon.jobs.result_score IS 'SSIMULACRA2 (0-100) of the stored result against the chain''s own pixels; NULL when not computed';

-- The finished notification of a success, with them: the payload of 0012's function plus
-- "result_quality" and "result_score" (numbers or null). A new signature beside the old one,
-- which failures and cancellations (the trigger) and workers not yet upgraded keep calling.
CREATE FUNCTION halcyon.finished_payload(id bigint, state halcyon.job_state, queue text, cache_hit boolean,
                                         result_key text, result_path text, code text,
                                         result_quality smallint, result_score real) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT '{"id": ' || id || ', "state": "' || state || '", "queue": "' || queue
        || '", "cache_hit": ' || coalesce(cache_hit::text, 'null')
        || ', "result_key": ' || coalesce(to_json(left(result_key, 512))::text, 'null')
        || ', "result_path": ' || coalesce(to_json(left(result_path, 512))::text, 'null')
        || CASE WHEN state = 'succeeded' THEN ', "result_quality": ' || coalesce(result_quality::text, 'null')
                || ', "result_score": ' || coalesce(to_json(result_score)::text, 'null') ELSE '' END
        || CASE WHEN state = 'failed' THEN ', "code": ' || coalesce(to_json(left(code, 128))::text, 'null') ELSE '' END
        || '}'
$$;
