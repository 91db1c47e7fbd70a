-- Halcyon 0024: a result's encoder quality with its half step. The perceptual search moves JPEG
-- (encoded through libjpeg directly) in half qualities where one whole step would overshoot the
-- target by more than a point: libjpeg's scale between two whole qualities. `result_quality`
-- (smallint, a contract) keeps the whole part; `result_quality_exact` holds the quality as used:
-- 82.5, or 82 for a whole one, whenever `result_quality` is set (NULL in rows written before
-- this migration, and for formats without a quality). Additive: existing rows keep NULLs, and
-- a new column rather than a wider `result_quality` (changing its type would rewrite the table
-- under an exclusive lock).
ALTER TABLE halcyon.jobs ADD COLUMN IF NOT EXISTS result_quality_exact real;

-- 1–100 in halves. NOT VALID: existing rows hold NULLs, and checking them would scan the table
-- under a lock.
ALTER TABLE halcyon.jobs ADD CONSTRAINT jobs_result_quality_exact_halves
    CHECK (result_quality_exact BETWEEN 1 AND 100 AND result_quality_exact * 2 = trunc(result_quality_exact * 2)) NOT VALID;

COMMENT ON COLUMN halcyon.jobs.result_quality_exact IS 'the encoder quality the result was written with, half qualities included (82.5); result_quality is its whole part; NULL without a quality';
