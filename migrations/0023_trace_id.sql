-- Halcyon 0023: the trace a job's attempts were exported in. A worker with tracing on records,
-- right after the claim, the trace id of the job's `process` spans: the enqueuer's (a child of
-- its traceparent) or one of the job's own, kept by every later attempt so that all of them are
-- in one trace. NULL: no span of the job was exported (tracing off, or not sampled). Additive:
-- existing rows keep NULLs.
ALTER TABLE halcyon.jobs ADD COLUMN IF NOT EXISTS trace_id text;

-- 32 lowercase hex digits, not all zero (W3C Trace Context's trace-id). NOT VALID: existing rows
-- hold NULLs, and checking them would scan the table under a lock.
ALTER TABLE halcyon.jobs ADD CONSTRAINT jobs_trace_id_format
    CHECK (trace_id ~ '^[0-9a-f]{32}$' AND trace_id <> '00000000000000000000000000000000') NOT VALID;
