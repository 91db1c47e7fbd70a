-- Recording a held claim's outcome: success (in groups), failure, refusal, release.
--
-- Every statement here is guarded by `state = 'running' AND locked_by = <this worker> AND
-- attempt = <the claim's attempt>` and by the claim's stamp (claim.sql): `(stamp IS NULL OR
-- started_at = stamp::timestamptz)` — a NULL stamp matches any claim of the attempt (a caller
-- that did not claim the job itself). So neither a stalled worker nor a later claim of the same
-- attempt (after a release gave the attempt back) can have its outcome written over.
--
-- `errors` keeps the latest 50 entries: `(CASE WHEN jsonb_array_length(errors) >= 50 THEN
-- errors - 0 ELSE errors END) || <the new entry>`, so a job retried for a long time does not
-- grow its row without end (also in leases.sql's rescues).

-- name: complete :many
-- Records many successes in one statement (group commit). $1 worker id, $2 a JSON array of {id,
-- attempt, claimed_at (the claim's stamp), result_key, result_digest, result_path, result_bytes,
-- result_width, result_height, result_format, cache_hit, result_source, timings, source_width,
-- source_height, source_format, source_bytes, source_meta, placeholders (JSON text),
-- result_quality, result_quality_exact, result_score, result_target_missed, result_chroma, source_pdq,
-- source_pdq_quality, result_pdq, result_pdq_quality, source_pdq_dihedral and result_manifest (JSON
-- text)}. A picture set's notification carries its rung count ("rungs").
-- Returns the ids still ours (this worker, this attempt, this claim), now succeeded. Like the
-- `jobs_finished` trigger does for failures, it sends each one's `halcyon_job_finished` and
-- makes its webhook due — in the statement itself, which costs a third of a trigger call per
-- row.
WITH done AS (
    UPDATE halcyon.jobs AS j
    SET state = 'succeeded', locked_by = NULL, locked_until = NULL, finished_at = now(),
        result_key = r.result_key, result_digest = r.result_digest, result_path = r.result_path,
        result_bytes = r.result_bytes, result_width = r.result_width, result_height = r.result_height,
        result_format = r.result_format, cache_hit = r.cache_hit, result_source = r.result_source, timings = r.timings,
        source_width = r.source_width, source_height = r.source_height, source_format = r.source_format,
        source_bytes = r.source_bytes, source_meta = r.source_meta::jsonb, placeholders = r.placeholders::jsonb,
        result_quality = r.result_quality, result_score = r.result_score, result_target_missed = r.result_target_missed,
        result_chroma = r.result_chroma, result_quality_exact = r.result_quality_exact,
        source_pdq = r.source_pdq, source_pdq_quality = r.source_pdq_quality, result_pdq = r.result_pdq,
        result_pdq_quality = r.result_pdq_quality, source_pdq_dihedral = r.source_pdq_dihedral,
        result_manifest = r.result_manifest::jsonb,
        callback_status = CASE WHEN j.options ? 'callback_url' THEN 'pending' END,
        callback_at = CASE WHEN j.options ? 'callback_url' THEN now() END,
        callback_attempts = CASE WHEN j.options ? 'callback_url' THEN 0 ELSE j.callback_attempts END,
        callback_error = NULL
    FROM jsonb_to_recordset($2::jsonb) AS r(id bigint, attempt int, result_key text, result_digest text, result_path text,
         result_bytes bigint, result_width int, result_height int, result_format text, cache_hit boolean,
         result_source text, timings jsonb, source_width int, source_height int, source_format text,
         source_bytes bigint, source_meta text, placeholders text, result_quality smallint, result_score real, result_target_missed boolean,
         result_chroma text, result_quality_exact real, source_pdq text, source_pdq_quality smallint, result_pdq text,
         result_pdq_quality smallint, source_pdq_dihedral text[], result_manifest text, claimed_at text)
    WHERE j.id = r.id AND j.attempt = r.attempt AND j.state = 'running' AND j.locked_by = $1
      AND (r.claimed_at IS NULL OR j.started_at = (r.claimed_at)::timestamptz)
    RETURNING j.id, j.state, j.queue, j.cache_hit, j.result_key, j.result_path, j.result_quality, j.result_score,
        jsonb_array_length(j.result_manifest -> 'rungs') AS rungs
)
SELECT id, pg_notify('halcyon_job_finished',
                     halcyon.finished_payload(id, state, queue, cache_hit, result_key, result_path, NULL, result_quality, result_score, rungs))
FROM done;

-- name: fail :one
-- $1 id, $2 worker id, $3 error entry (jsonb without `at`/`attempt`), $4 last_error text, $5
-- permanent (bool), $6 retry delay seconds, $7 stage timings (jsonb), $8 the attempt, $9 the
-- claim's stamp. Permanent errors, and transient ones on the last attempt, end in `failed`;
-- other transient ones go back to `queued` after $6 seconds. Returns the new state.
UPDATE halcyon.jobs
SET state = CASE WHEN $5::boolean OR attempt >= max_attempts THEN 'failed' ELSE 'queued' END::halcyon.job_state,
    run_at = CASE WHEN $5::boolean OR attempt >= max_attempts THEN run_at
                  ELSE now() + make_interval(secs => $6::float8) END,
    finished_at = CASE WHEN $5::boolean OR attempt >= max_attempts THEN now() END,
    locked_by = NULL, locked_until = NULL,
    errors = (CASE WHEN jsonb_array_length(errors) >= 50 THEN errors - 0 ELSE errors END) || jsonb_build_array(
        jsonb_build_object('at', now(), 'attempt', attempt) || $3::jsonb),
    last_error = $4, timings = $7::jsonb
WHERE id = $1::bigint AND attempt = $8::int AND state = 'running' AND locked_by = $2 AND ($9::text IS NULL OR started_at = ($9::text)::timestamptz)
RETURNING state::text;

-- name: failRejected :one
-- Fails a held claim whose outcome the database refused, for good, with that refusal's entry
-- (`worker.outcome_rejected`). $1 id, $2 attempt, $3 worker id, $4 error entry (jsonb without
-- `at`/`attempt`), $5 last_error text, $6 the claim's stamp.
UPDATE halcyon.jobs
SET state = 'failed', finished_at = now(), locked_by = NULL, locked_until = NULL,
    errors = (CASE WHEN jsonb_array_length(errors) >= 50 THEN errors - 0 ELSE errors END) || jsonb_build_array(jsonb_build_object('at', now(), 'attempt', attempt) || $4::jsonb),
    last_error = $5
WHERE id = $1::bigint AND attempt = $2::int AND state = 'running' AND locked_by = $3 AND ($6::text IS NULL OR started_at = ($6::text)::timestamptz)
RETURNING id;

-- name: markOutcomeRejected :one
-- Notes on a held claim that the database refused its outcome, leaving it `running` (its lease
-- lapses and the rescue takes it from there) — when it refuses `failRejected` too. $1 id, $2
-- attempt, $3 worker id, $4 error entry (jsonb without `at`/`attempt`), $5 last_error text, $6
-- the claim's stamp.
UPDATE halcyon.jobs
SET errors = (CASE WHEN jsonb_array_length(errors) >= 50 THEN errors - 0 ELSE errors END) || jsonb_build_array(jsonb_build_object('at', now(), 'attempt', attempt) || $4::jsonb),
    last_error = $5
WHERE id = $1::bigint AND attempt = $2::int AND state = 'running' AND locked_by = $3 AND ($6::text IS NULL OR started_at = ($6::text)::timestamptz)
RETURNING id;

-- name: release :many
-- Puts unfinished jobs back without spending their attempt (a graceful stop). $1 ids
-- (bigint[]), $2 their attempts (int[]), $3 worker id, $4 their claims' stamps (text[], NULL
-- elements match any).
UPDATE halcyon.jobs j
SET state = 'queued', attempt = greatest(j.attempt - 1, 0), locked_by = NULL, locked_until = NULL,
    run_at = now()
FROM unnest($1::bigint[], $2::int[], $4::text[]) AS c(id, attempt, stamp)
WHERE j.id = c.id AND j.attempt = c.attempt AND j.state = 'running' AND j.locked_by = $3
  AND (c.stamp IS NULL OR j.started_at = (c.stamp)::timestamptz)
RETURNING j.id;

-- name: recordTraceIDs :exec
-- Records the trace each held claim's spans are exported in (a worker with tracing on, right
-- after the claim). $1 ids (bigint[]), $2 their attempts (int[]), $3 worker id, $4 the trace ids
-- (text[], 32 lowercase hex digits). A row that already holds its id is not written again.
UPDATE halcyon.jobs j
SET trace_id = c.trace_id
FROM unnest($1::bigint[], $2::int[], $4::text[]) AS c(id, attempt, trace_id)
WHERE j.id = c.id AND j.attempt = c.attempt AND j.state = 'running' AND j.locked_by = $3
  AND j.trace_id IS DISTINCT FROM c.trace_id;
