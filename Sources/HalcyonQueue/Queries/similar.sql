-- Near-duplicate lookups by perceptual hash (PDQ), through migration 0025's functions, which
-- read the multi-index hashing index up to a distance of 47 bits.

-- name: similarImages :many
-- The jobs whose source_pdq is within $2 bits of the hash $1 (64 hex digits), nearest first (at
-- most $3 of them).
SELECT s.job_id, s.distance, 'original' AS variant, s.source, s.state::text AS state, s.source_pdq_quality
FROM halcyon.similar_images($1::text, $2::int) AS s
LIMIT $3::int;

-- name: similarToJob :many
-- The near-duplicates of job $1's source within $2 bits (with $3, of its turned and mirrored
-- copies too, through its dihedral hashes), nearest first, the job itself left out (at most $4).
SELECT s.job_id, s.distance, s.variant, s.source, s.state::text AS state, s.source_pdq_quality
FROM halcyon.similar_to_job($1::bigint, $2::int, $3::boolean) AS s
LIMIT $4::int;
