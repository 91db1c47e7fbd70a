-- `halcyon bench`: its databases, and what it reads of the jobs its scenarios ran. The bench's
-- jobs are the rows whose `cache_key` starts with `halcyon-bench:`.
--
-- A stage's milliseconds come from a job's `timings` (0 when the stage did not run):
-- `coalesce((timings->>'STAGE_ms')::float8, 0)`.

-- name: databaseExists :one
-- Whether database $1 exists.
SELECT 1 AS found FROM pg_database WHERE datname = $1;

-- name: createBenchDatabase :exec
CREATE DATABASE halcyon_bench;

-- name: createPgqueuerDatabase :exec
-- pgqueuer's, beside the bench's on the embedded cluster (it installs tables of its own).
CREATE DATABASE halcyon_bench_pgqueuer;

-- name: foreignJobs :one
-- Whether the database holds a job that is not the bench's (its workers take whatever is queued).
SELECT count(*) AS n FROM (SELECT 1 FROM halcyon.jobs WHERE cache_key IS NULL OR cache_key NOT LIKE 'halcyon-bench:%' LIMIT 1) f;

-- name: deleteBenchJobs :exec
DELETE FROM halcyon.jobs WHERE cache_key LIKE 'halcyon-bench:%';

-- name: deleteBenchWorkers :exec
DELETE FROM halcyon.workers WHERE id LIKE 'halcyon-bench-%';

-- name: w1Outputs :one
-- W1's outputs that are what it asks for: 320×320 JPEGs.
SELECT count(*) FILTER (WHERE state = 'succeeded' AND result_width = 320 AND result_height = 320 AND result_format = 'jpeg') AS ok
FROM halcyon.jobs;

-- name: w1Images :many
-- W1's images: each one's key, result and what it cost (its stages' sum, without its wait for a
-- processing slot).
SELECT cache_key, result_path,
       coalesce((timings->>'fetch_ms')::float8, 0) + coalesce((timings->>'decode_ms')::float8, 0) + coalesce((timings->>'process_ms')::float8, 0) + coalesce((timings->>'encode_ms')::float8, 0) + coalesce((timings->>'store_ms')::float8, 0) AS ms
FROM halcyon.jobs;

-- name: copyForHits :exec
-- H: the succeeded bench jobs again, $1 copies of each (their results are in the store) …
INSERT INTO halcyon.jobs (source, processors, cache_key)
SELECT source, processors, cache_key FROM halcyon.jobs, generate_series(1, $1::int)
WHERE cache_key LIKE 'halcyon-bench:%' AND state = 'succeeded';

-- name: deleteSucceeded :exec
-- … and the originals gone.
DELETE FROM halcyon.jobs WHERE cache_key LIKE 'halcyon-bench:%' AND state = 'succeeded';

-- name: hitDrain :one
-- H's store hits, and the seconds from the first claim to the last completion.
SELECT count(*) FILTER (WHERE state = 'succeeded' AND cache_hit) AS n,
       extract(epoch FROM max(finished_at) - min(started_at))::float8 AS drain
FROM halcyon.jobs;

-- name: hostsDrain :one
-- X's jobs (keys matching $1): how many succeeded as 320×320 JPEGs, and the seconds from the
-- first claim to the last completion (the database's clock, whichever host ran them).
SELECT count(*) FILTER (WHERE state = 'succeeded' AND result_format = 'jpeg' AND result_width = 320 AND result_height = 320) AS n,
       extract(epoch FROM max(finished_at) - min(started_at))::float8 AS drain
FROM halcyon.jobs
WHERE cache_key LIKE $1;

-- name: w2Outputs :one
-- W2's outputs (keys matching $1) that are as asked: a 320×320 JPEG, a WebP fitted to 1024, a
-- 64×64 PNG.
SELECT count(*) FILTER (WHERE state = 'succeeded' AND (
    (result_format = 'jpeg' AND result_width = 320 AND result_height = 320) OR
    (result_format = 'webp' AND greatest(result_width, result_height) = 1024) OR
    (result_format = 'png' AND result_width = 64 AND result_height = 64))) AS ok
FROM halcyon.jobs WHERE cache_key LIKE $1;

-- name: w3Outputs :one
-- W3's outputs (keys matching $1) that are as asked: a PNG fitted to 800, a 640×640 WebP.
SELECT count(*) FILTER (WHERE state = 'succeeded' AND (
    (result_format = 'png' AND greatest(result_width, result_height) = 800) OR
    (result_format = 'webp' AND result_width = 640 AND result_height = 640))) AS ok
FROM halcyon.jobs WHERE cache_key LIKE $1;

-- name: sourceCosts :many
-- What each source of the jobs with keys matching $1 cost: its jobs share its fetch and decode,
-- and each adds its own processing.
SELECT max(coalesce((timings->>'fetch_ms')::float8, 0) + coalesce((timings->>'decode_ms')::float8, 0))
       + sum(coalesce((timings->>'process_ms')::float8, 0) + coalesce((timings->>'encode_ms')::float8, 0) + coalesce((timings->>'store_ms')::float8, 0)) AS ms
FROM halcyon.jobs WHERE cache_key LIKE $1 GROUP BY source;

-- name: stageCPUPerImage :one
-- Mean CPU milliseconds per image in each stage, over the bench's jobs (quoted names: FETCH is
-- a keyword). A job's decode is its share of its source's.
SELECT avg("decode") AS "decode", avg("process") AS "process", avg("encode") AS "encode", avg("store") AS "store"
FROM (SELECT max(coalesce((timings->>'decode_cpu_ms')::float8, 0)) AS "decode", max(coalesce((timings->>'process_cpu_ms')::float8, 0)) AS "process",
             max(coalesce((timings->>'encode_cpu_ms')::float8, 0)) AS "encode", max(coalesce((timings->>'store_cpu_ms')::float8, 0)) AS "store"
      FROM halcyon.jobs WHERE cache_key LIKE 'halcyon-bench:%' GROUP BY id) per;

-- name: stageCPUPerSource :one
-- The same per source: its jobs share one decode, each recording its share (so the source's is
-- their sum), and add their own processing.
SELECT avg("decode") AS "decode", avg("process") AS "process", avg("encode") AS "encode", avg("store") AS "store"
FROM (SELECT sum(coalesce((timings->>'decode_cpu_ms')::float8, 0)) AS "decode", sum(coalesce((timings->>'process_cpu_ms')::float8, 0)) AS "process",
             sum(coalesce((timings->>'encode_cpu_ms')::float8, 0)) AS "encode", sum(coalesce((timings->>'store_cpu_ms')::float8, 0)) AS "store"
      FROM halcyon.jobs WHERE cache_key LIKE 'halcyon-bench:%' GROUP BY source) per;

-- name: startDelays :many
-- L: each miss's wait from enqueue to start (ms, the database's clock), of the jobs with keys
-- matching $1.
SELECT extract(epoch FROM started_at - created_at)::float8 * 1000 AS ms FROM halcyon.jobs
WHERE cache_key LIKE $1 AND started_at IS NOT NULL AND NOT cache_hit;

-- name: countJobs :one
-- Every row.
SELECT count(*) AS n FROM halcyon.jobs;

-- name: finishedSince :one
-- Jobs finished since $1 (timestamptz).
SELECT count(*) AS n FROM halcyon.jobs WHERE finished_at >= $1::timestamptz;

-- name: insertHashes :exec
-- N: recorded perceptual hashes, as jobs that hashed their sources — $1 (hashes of 64 hex digits,
-- comma-separated) numbered from $2 on.
INSERT INTO halcyon.jobs (source, cache_key, state, finished_at, source_pdq, source_pdq_quality)
SELECT 'https://bench.invalid/pdq/' || ($2::bigint + u.n) || '.jpg', 'halcyon-bench:pdq-' || ($2::bigint + u.n), 'succeeded', now(), u.hash, 90
FROM unnest(string_to_array($1::text, ',')) WITH ORDINALITY AS u(hash, n);

-- name: deleteHashes :exec
-- N's rows.
DELETE FROM halcyon.jobs WHERE cache_key LIKE 'halcyon-bench:pdq-%';

-- name: vacuumAnalyzeJobs :exec
-- After N's fill, what autovacuum would do next.
VACUUM (ANALYZE) halcyon.jobs;

-- name: scanHashes :many
-- N's reference: the ids of the bench's rows whose source_pdq is within $2 bits of $1, by
-- reading every row (no index has this expression).
SELECT id FROM halcyon.jobs
WHERE cache_key LIKE 'halcyon-bench:pdq-%' AND source_pdq IS NOT NULL
  AND bit_count(('x' || source_pdq)::bit(256) # ('x' || $1::text)::bit(256)) <= $2::int;
