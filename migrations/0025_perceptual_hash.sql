-- Halcyon 0025: perceptual hashes (PDQ, Meta's 256-bit hash) of a job's source and output, and a
-- lookup of near-duplicates that stays on an index at millions of rows.
--
-- A worker computes them when the job's options ask (`"perceptual_hash": true`, `"source"`,
-- `"output"` or `"dihedral"`): source_pdq (64 lowercase hex digits, as Meta's tools print them)
-- and source_pdq_quality (0–100; below 50 the hash says little), from the decoded source;
-- result_pdq and result_pdq_quality from the output's pixels ("output"); source_pdq_dihedral,
-- the source's seven other dihedral hashes — turned a quarter anticlockwise, a half and three
-- quarters, mirrored top-bottom and left-right, across either diagonal, in that order —
-- ("dihedral"), so that a turned or mirrored copy of this source stored earlier is found too.
-- Additive: existing rows keep NULLs; the checks are NOT VALID (the new columns are NULL in
-- every existing row, so no scan under the lock).
ALTER TABLE halcyon.jobs
    ADD COLUMN IF NOT EXISTS source_pdq text,
    ADD COLUMN IF NOT EXISTS source_pdq_quality smallint,
    ADD COLUMN IF NOT EXISTS result_pdq text,
    ADD COLUMN IF NOT EXISTS result_pdq_quality smallint,
    ADD COLUMN IF NOT EXISTS source_pdq_dihedral text[];

ALTER TABLE halcyon.jobs
    ADD CONSTRAINT jobs_source_pdq_format CHECK (source_pdq ~ '^[0-9a-f]{64}$') NOT VALID,
    ADD CONSTRAINT jobs_result_pdq_format CHECK (result_pdq ~ '^[0-9a-f]{64}$') NOT VALID,
    ADD CONSTRAINT jobs_pdq_quality_range
        CHECK (source_pdq_quality BETWEEN 0 AND 100 AND result_pdq_quality BETWEEN 0 AND 100) NOT VALID,
    ADD CONSTRAINT jobs_source_pdq_dihedral_format
        CHECK (array_to_string(source_pdq_dihedral, ',') ~ '^([0-9a-f]{64},){6}[0-9a-f]{64}$'
               AND cardinality(source_pdq_dihedral) = 7) NOT VALID;

COMMENT ON COLUMN halcyon.jobs.source_pdq IS 'the source''s PDQ hash (64 lowercase hex digits) when the job''s options asked for perceptual_hash';
COMMENT ON COLUMN halcyon.jobs.source_pdq_quality IS 'the quality of source_pdq, 0-100 (below 50 the hash is unreliable)';
COMMENT ON COLUMN halcyon.jobs.result_pdq IS 'the output''s PDQ hash, with perceptual_hash "output"';
COMMENT ON COLUMN halcyon.jobs.result_pdq_quality IS 'the quality of result_pdq, 0-100';
COMMENT ON COLUMN halcyon.jobs.source_pdq_dihedral IS 'the source''s seven other dihedral PDQ hashes (rotate 90, 180, 270, flip x, flip y, flip +1, flip -1), with perceptual_hash "dihedral"';

-- A hash as 16 integers, chunk i's 16 bits tagged with i (i << 16 | bits): the keys of the
-- multi-index hashing index. NULL for anything but 64 lowercase hex digits.
-- (PL/pgSQL, never inlined: the index's expression and a query's are the same call.)
CREATE FUNCTION halcyon.pdq_chunks(hash text) RETURNS int[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    IF hash !~ '^[0-9a-f]{64}$' THEN
        RETURN NULL;
    END IF;
    RETURN ARRAY(SELECT (i << 16) | ('x' || substr(hash, 4 * i + 1, 4))::bit(16)::int FROM generate_series(0, 15) AS i ORDER BY i);
END
$$;

-- The keys a hash within `radius` bits per chunk may share with another: every chunk of `hash`
-- with at most `radius` (0–2) of its 16 bits flipped. Two hashes at most 16·r + 15 bits apart
-- have some chunk at most r bits apart (16 chunks cannot each differ in r + 1), so a distance
-- up to 15 needs radius 0 (16 keys), up to 31 radius 1 (272), up to 47 radius 2 (2,192).
CREATE FUNCTION halcyon.pdq_probe(hash text, radius int) RETURNS int[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    WITH masks AS (
        SELECT 0 AS mask
        UNION ALL SELECT 1 << b FROM generate_series(0, 15) AS b WHERE radius >= 1
        UNION ALL SELECT (1 << a) | (1 << b) FROM generate_series(0, 15) AS a, generate_series(0, 15) AS b WHERE radius >= 2 AND a < b
    )
    SELECT ARRAY(
        SELECT (i << 16) | (('x' || substr(hash, 4 * i + 1, 4))::bit(16)::int # m.mask)
        FROM generate_series(0, 15) AS i, masks AS m
    )
$$;

-- The number of bits two hashes differ in; NULL when either is not 64 lowercase hex digits.
CREATE FUNCTION halcyon.pdq_distance(a text, b text) RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN a ~ '^[0-9a-f]{64}$' AND b ~ '^[0-9a-f]{64}$'
        THEN bit_count(('x' || a)::bit(256) # ('x' || b)::bit(256))::int END
$$;

-- Multi-index hashing: each hash's 16 chunks in a GIN index, so a lookup reads the rows sharing a
-- chunk (or, within the distance asked, a nearly equal one) instead of every row. Partial: rows
-- without a hash are not in it. Without GIN's pending list (fastupdate): every lookup would scan
-- up to 4 MB of entries not yet merged (100 ms at a million rows), for a cheaper insert.
CREATE INDEX jobs_source_pdq_idx ON halcyon.jobs USING gin (halcyon.pdq_chunks(source_pdq)) WITH (fastupdate = off)
    WHERE source_pdq IS NOT NULL;

-- Every job whose source_pdq is within `max_distance` bits (0–256, default 31: a match by Meta's
-- figures) of `hash` (64 hex digits, either case), nearest first: its id, the distance, its
-- source, state and hash quality. Up to 47 bits on the index; beyond, a scan of every hashed row.
CREATE FUNCTION halcyon.similar_images(hash text, max_distance int DEFAULT 31)
RETURNS TABLE (job_id bigint, distance int, source text, state halcyon.job_state, source_pdq_quality smallint)
-- The planner prices a GIN lookup of hundreds of keys as if each matched its share of the table,
-- and would scan it instead (or plan workers and JIT-compile for a few thousand rows); the
-- index reads a few rows per key.
LANGUAGE plpgsql STABLE SET enable_seqscan = off SET jit = off SET max_parallel_workers_per_gather = 0 AS $$
DECLARE
    h text := lower(hash);
    q bit(256);
BEGIN
    IF h IS NULL OR h !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'halcyon.similar_images: hash must be 64 hex digits (a PDQ hash), got %', left(coalesce(hash, 'NULL'), 80)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_distance IS NULL OR max_distance NOT BETWEEN 0 AND 256 THEN
        RAISE EXCEPTION 'halcyon.similar_images: max_distance must be 0 to 256, got %', max_distance
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    q := ('x' || h)::bit(256);
    -- The rows' hashes are held to the format by the table's check: the distance is one XOR and
    -- a bit count.
    IF max_distance <= 47 THEN
        RETURN QUERY
        SELECT j.id, d.distance, j.source, j.state, j.source_pdq_quality
        FROM halcyon.jobs AS j, LATERAL (SELECT bit_count(('x' || j.source_pdq)::bit(256) # q)::int AS distance) AS d
        WHERE j.source_pdq IS NOT NULL
          AND halcyon.pdq_chunks(j.source_pdq) && halcyon.pdq_probe(h, max_distance / 16)
          AND d.distance <= max_distance
        ORDER BY 2, 1;
    ELSE
        RETURN QUERY
        SELECT j.id, d.distance, j.source, j.state, j.source_pdq_quality
        FROM halcyon.jobs AS j, LATERAL (SELECT bit_count(('x' || j.source_pdq)::bit(256) # q)::int AS distance) AS d
        WHERE j.source_pdq IS NOT NULL AND d.distance <= max_distance
        ORDER BY 2, 1;
    END IF;
END
$$;

-- The near-duplicates of job `id`'s source (its source_pdq; with `dihedral` and the job's
-- source_pdq_dihedral, of its turned and mirrored copies too), nearest first, the job itself
-- left out: each other job once, at its least distance, with the variant that matched
-- ('original', 'rotate90', 'rotate180', 'rotate270', 'flipx', 'flipy', 'flipplus1',
-- 'flipminus1'). No rows when the job has no hash.
CREATE FUNCTION halcyon.similar_to_job(id bigint, max_distance int DEFAULT 31, dihedral boolean DEFAULT false)
RETURNS TABLE (job_id bigint, distance int, variant text, source text, state halcyon.job_state, source_pdq_quality smallint)
LANGUAGE sql STABLE AS $$
    WITH me AS (SELECT j.source_pdq, j.source_pdq_dihedral FROM halcyon.jobs AS j WHERE j.id = similar_to_job.id),
    probes AS (
        SELECT me.source_pdq AS hash, 'original' AS variant, 0 AS n FROM me WHERE me.source_pdq IS NOT NULL
        UNION ALL
        SELECT d.hash, (ARRAY['rotate90', 'rotate180', 'rotate270', 'flipx', 'flipy', 'flipplus1', 'flipminus1'])[d.n], d.n
        FROM me, unnest(me.source_pdq_dihedral) WITH ORDINALITY AS d(hash, n)
        WHERE similar_to_job.dihedral
    ),
    found AS (
        SELECT DISTINCT ON (s.job_id) s.job_id, s.distance, p.variant, s.source, s.state, s.source_pdq_quality
        FROM probes AS p, halcyon.similar_images(p.hash, similar_to_job.max_distance) AS s
        WHERE s.job_id <> similar_to_job.id
        ORDER BY s.job_id, s.distance, p.n
    )
    SELECT * FROM found ORDER BY distance, job_id
$$;
