-- Cache keys scoped to their queue. By default every queue shares one key space: a job's result
-- is stored under `cache_key@identifier`, and any job with that key and chain is served it (or,
-- with force_refresh, replaces it). A queue with `isolated_keys` keeps its results to itself: its
-- jobs' keys are looked up and stored under the queue's name as well, so a job in another queue
-- — another party, with the same cache_key — can neither read nor repoint them. `result_key`
-- stays `cache_key@identifier` either way. Turning it on or off makes the queue's earlier
-- results unreachable (they expire as usual).
ALTER TABLE halcyon.queues ADD COLUMN isolated_keys boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN halcyon.queues.isolated_keys IS
    'results are stored and found under this queue''s own key space: jobs in other queues cannot read or replace them';

-- The finished notification's payload: each free-text field cut to 512 characters, so that even
-- characters JSON writes as \u00XX (six bytes each) keep it under PostgreSQL's 8,000-byte limit
-- (1,024 did not: a long key and path of control characters made the recording statement fail).
CREATE OR REPLACE FUNCTION halcyon.finished_payload(id bigint, state halcyon.job_state, queue text, cache_hit boolean,
                                                    result_key text, result_path text, code text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT '{"id": ' || id || ', "state": "' || state || '", "queue": "' || queue
        || '", "cache_hit": ' || coalesce(cache_hit::text, 'null')
        || ', "result_key": ' || coalesce(to_json(left(result_key, 512))::text, 'null')
        || ', "result_path": ' || coalesce(to_json(left(result_path, 512))::text, 'null')
        || CASE WHEN state = 'failed' THEN ', "code": ' || coalesce(to_json(left(code, 128))::text, 'null') ELSE '' END
        || '}'
$$;
