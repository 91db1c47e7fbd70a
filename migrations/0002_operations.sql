-- Halcyon 0002 (issue #6): stage timings of each job's latest attempt, and a record of store
-- sweeps. Timings are milliseconds per stage, written with the outcome (success or failure)
-- of each attempt:
--   {"queue_wait_ms", "fetch_ms", "decode_ms", "process_ms", "encode_ms", "store_ms", "total_ms"}
-- A stage that did not run is absent (a store hit has no fetch, decode, process or encode).
-- decode_ms and fetch_ms are shared by the jobs of a batch that share a source.

ALTER TABLE halcyon.jobs ADD COLUMN timings jsonb;

COMMENT ON COLUMN halcyon.jobs.timings IS
    'milliseconds per stage of the latest attempt: queue_wait_ms, fetch_ms, decode_ms, process_ms, encode_ms, store_ms, total_ms';

-- Mean stage times of jobs finished in the last hour, for operators.
CREATE VIEW halcyon.stage_times AS
SELECT count(*) AS jobs,
       round(avg((timings->>'queue_wait_ms')::numeric), 1) AS queue_wait_ms,
       round(avg((timings->>'fetch_ms')::numeric), 1)      AS fetch_ms,
       round(avg((timings->>'decode_ms')::numeric), 1)     AS decode_ms,
       round(avg((timings->>'process_ms')::numeric), 1)    AS process_ms,
       round(avg((timings->>'encode_ms')::numeric), 1)     AS encode_ms,
       round(avg((timings->>'store_ms')::numeric), 1)      AS store_ms,
       round(avg((timings->>'total_ms')::numeric), 1)      AS total_ms
FROM halcyon.jobs
WHERE finished_at > now() - interval '1 hour' AND timings IS NOT NULL;

-- Store sweeps (by `halcyon sweep` and by workers): what the store held afterwards, so
-- `halcyon status` can show the store's size against its limit without walking it.
CREATE TABLE halcyon.store_sweeps (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT now(),
    swept_by      text NOT NULL,
    store_root    text NOT NULL,
    kept_files    bigint NOT NULL,
    kept_bytes    bigint NOT NULL,
    size_limit    bigint,
    removed_files bigint NOT NULL,
    removed_keys  bigint NOT NULL,
    freed_bytes   bigint NOT NULL,
    seconds       double precision NOT NULL
);
CREATE INDEX store_sweeps_at_idx ON halcyon.store_sweeps (at DESC);
