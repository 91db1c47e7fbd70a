-- Halcyon 0017: the values the claim computes with are bounded by the database, whoever writes
-- them. An application's `run_at => '-infinity'` or an operator's `UPDATE halcyon.queues SET
-- tokens_at = '-infinity'` used to be accepted, and the claim statement, which subtracts and
-- adds with them, then failed for every queue on every try. Rows already holding such values
-- are repaired first (a timestamp of ±infinity becomes now, or 9999-12-31 for a job held with
-- run_at 'infinity'; a token bucket out of range becomes full; counts are clamped), then the
-- constraints are added. One pass over halcyon.jobs each (about a second per million rows).

UPDATE halcyon.jobs
SET run_at       = CASE WHEN run_at = 'infinity' THEN '9999-12-31 23:59:59+00' WHEN run_at = '-infinity' THEN now() ELSE run_at END,
    created_at   = CASE WHEN isfinite(created_at) THEN created_at ELSE now() END,
    started_at   = CASE WHEN isfinite(started_at) THEN started_at ELSE now() END,
    finished_at  = CASE WHEN isfinite(finished_at) THEN finished_at ELSE now() END,
    locked_until = CASE WHEN isfinite(locked_until) THEN locked_until ELSE now() END,
    callback_at  = CASE WHEN isfinite(callback_at) THEN callback_at ELSE now() END,
    attempt      = least(attempt, 1000000),
    max_attempts = least(max_attempts, 1000000)
WHERE NOT (isfinite(run_at) AND isfinite(created_at) AND coalesce(isfinite(started_at), true) AND coalesce(isfinite(finished_at), true)
           AND coalesce(isfinite(locked_until), true) AND coalesce(isfinite(callback_at), true))
   OR attempt > 1000000 OR max_attempts > 1000000;

-- isfinite(NULL) is NULL, which a CHECK lets through: the optional timestamps stay optional.
ALTER TABLE halcyon.jobs
    ADD CONSTRAINT jobs_times_finite CHECK (isfinite(run_at) AND isfinite(created_at) AND isfinite(started_at) AND isfinite(finished_at)
                                            AND isfinite(locked_until) AND isfinite(callback_at)),
    ADD CONSTRAINT jobs_attempts_range CHECK (attempt <= 1000000 AND max_attempts <= 1000000);
COMMENT ON CONSTRAINT jobs_times_finite ON halcyon.jobs IS 'every timestamp of a job is a time, not ±infinity (run_at: a far date holds a job)';
COMMENT ON CONSTRAINT jobs_attempts_range ON halcyon.jobs IS 'attempt and max_attempts at most 1,000,000';

UPDATE halcyon.queues
SET tokens = NULL, tokens_at = NULL
WHERE NOT coalesce(tokens BETWEEN 0 AND 100000, tokens IS NULL) OR NOT coalesce(isfinite(tokens_at), true);
UPDATE halcyon.queues SET paused_at = now() WHERE NOT isfinite(paused_at);
UPDATE halcyon.queues SET created_at = now() WHERE NOT isfinite(created_at);

-- NaN sorts above every number: BETWEEN refuses it.
ALTER TABLE halcyon.queues
    ADD CONSTRAINT queues_tokens_range CHECK (tokens BETWEEN 0 AND 100000),
    ADD CONSTRAINT queues_times_finite CHECK (isfinite(tokens_at) AND isfinite(paused_at) AND isfinite(created_at));
COMMENT ON CONSTRAINT queues_tokens_range ON halcyon.queues IS 'a token bucket holds 0 to 100,000 claims (NULL: full)';

UPDATE halcyon.workers SET heartbeat_at = now() WHERE NOT isfinite(heartbeat_at);
UPDATE halcyon.workers SET started_at = now() WHERE NOT isfinite(started_at);
UPDATE halcyon.workers SET stopped_at = now() WHERE NOT isfinite(stopped_at);
UPDATE halcyon.workers SET crashed_at = now() WHERE NOT isfinite(crashed_at);
ALTER TABLE halcyon.workers
    ADD CONSTRAINT workers_times_finite CHECK (isfinite(started_at) AND isfinite(heartbeat_at) AND isfinite(stopped_at) AND isfinite(crashed_at));

-- A bucket is read defensively as well: a value the constraints above would refuse (written
-- before them, or by a restore that skipped them) counts as a full bucket, and the next claim
-- of the queue writes a good one back — never an error in the statement every queue shares.
CREATE OR REPLACE FUNCTION halcyon.queue_tokens(rate double precision, tokens double precision, since timestamptz) RETURNS double precision
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN tokens BETWEEN 0 AND 100000 AND isfinite(since) AND since <= now() AND rate BETWEEN 0.001 AND 100000
                THEN least(greatest(rate, 1), tokens + extract(epoch FROM now() - since)::float8 * rate)
                ELSE greatest(coalesce(least(rate, 100000), 1), 1) END
$$;
