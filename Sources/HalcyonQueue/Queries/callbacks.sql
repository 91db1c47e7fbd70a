-- Webhook deliveries, kept on the job's row (`callback_status`, `callback_attempts`,
-- `callback_error`, `callback_at`) so that a delivery that was due survives any worker.

-- name: takeCallbacks :many
-- Takes up to $1 due deliveries for $2 seconds (another worker may take one again after that: a
-- worker that died mid-delivery loses nothing), counting the attempt. Returns each job's id,
-- this attempt, the URL, the message id (the same for every attempt of one delivery), the JSON
-- body, and the job's trace context (sent as the delivery's traceparent and tracestate headers)
-- with the trace its spans were exported in. The body's `trace_id` is that trace's, else the
-- enqueuer's.
WITH due AS (
    SELECT id FROM halcyon.jobs
    WHERE callback_status = 'pending' AND callback_at <= now()
    ORDER BY callback_at
    LIMIT $1::int
    FOR UPDATE SKIP LOCKED
)
UPDATE halcyon.jobs j
SET callback_at = now() + make_interval(secs => $2::float8), callback_attempts = j.callback_attempts + 1
FROM due WHERE j.id = due.id
RETURNING j.id, j.callback_attempts, j.options ->> 'callback_url' AS url,
    'job_' || j.id || '_' || to_char(j.finished_at AT TIME ZONE 'UTC', 'YYYYMMDDHH24MISSUS') AS message_id,
    jsonb_build_object(
        'id', j.id, 'state', j.state, 'queue', j.queue, 'tags', j.tags, 'attempt', j.attempt,
        'finished_at', j.finished_at, 'cache_hit', j.cache_hit,
        'trace_id', coalesce(j.trace_id, CASE WHEN halcyon.is_valid_traceparent(j.traceparent) THEN substr(j.traceparent, 4, 32) END),
        'result', CASE WHEN j.state = 'succeeded' THEN jsonb_build_object(
            'key', j.result_key, 'digest', j.result_digest, 'path', j.result_path, 'bytes', j.result_bytes,
            'width', j.result_width, 'height', j.result_height, 'format', j.result_format, 'source', j.result_source,
            'quality', j.result_quality, 'quality_exact', j.result_quality_exact, 'score', j.result_score, 'target_missed', j.result_target_missed,
            'chroma', j.result_chroma, 'source_pdq', j.source_pdq, 'source_pdq_quality', j.source_pdq_quality,
            'result_pdq', j.result_pdq, 'result_pdq_quality', j.result_pdq_quality, 'manifest', j.result_manifest) END,
        'error', CASE WHEN j.state = 'failed' THEN (j.errors -> -1) - 'sources' END
    )::text AS body,
    j.traceparent, j.tracestate, j.trace_id;

-- name: putBackCallback :one
-- Puts back a delivery just taken, its attempt not spent, due in $3 seconds. $1 id, $2 the
-- attempt taken (the row is left alone if it moved on).
UPDATE halcyon.jobs
SET callback_attempts = callback_attempts - 1, callback_at = now() + make_interval(secs => $3::float8)
WHERE id = $1::bigint AND callback_attempts = $2::int AND callback_status = 'pending'
RETURNING id;

-- name: callbackDueSoon :one
-- Whether a delivery is pending and due within $1 seconds (a draining worker waits for those).
-- Deliveries another worker holds are due only when its hold runs out.
SELECT EXISTS (
    SELECT 1 FROM halcyon.jobs WHERE callback_status = 'pending' AND callback_at <= now() + make_interval(secs => $1::float8)
) AS due;

-- name: recordCallback :one
-- Records a delivery attempt. $1 id, $2 the attempt (the row is left alone if another attempt
-- has been taken since), $3 'delivered', 'pending' (retry) or 'failed', $4 error text (null when
-- delivered), $5 seconds until the retry.
UPDATE halcyon.jobs
SET callback_status = $3, callback_error = $4,
    callback_at = CASE WHEN $3 = 'pending' THEN now() + make_interval(secs => $5::float8) ELSE now() END
WHERE id = $1::bigint AND callback_status = 'pending' AND callback_attempts = $2::int
RETURNING id;
