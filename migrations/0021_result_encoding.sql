-- Halcyon 0021: two more facts of a result's encoding, written by the worker with the result.
-- Additive: existing rows keep NULLs.
--
-- result_target_missed: whether a perceptual result reached the score its chain asked for. A
-- `format` step with a min_score (quality=auto, format(auto)) whose search cannot reach it — a
-- noise image asked for 95, a max_bytes no reaching quality fits in — still succeeds with the
-- best result it found, and says so here: true when the stored result scores below the step's
-- min_score, false when it reaches it, NULL when the chain asks for no score or none could be
-- computed (an output under 8×8). Also in webhooks (`result.target_missed`).
--
-- result_chroma: a JPEG result's chroma sampling, read from its bytes: '4:4:4' (full), '4:2:0'
-- (half both ways), '4:2:2', '4:4:0', or 'grey' (one component); NULL for other formats. The
-- perceptual search chooses between 4:4:4 and 4:2:0. Also in webhooks (`result.chroma`).
ALTER TABLE halcyon.jobs
    ADD COLUMN result_target_missed boolean,
    ADD COLUMN result_chroma text,
    ADD CONSTRAINT jobs_result_chroma_known CHECK (result_chroma IN ('4:4:4', '4:2:0', '4:2:2', '4:4:0', 'grey'));

COMMENT ON COLUMN halcyon.jobs.result_target_missed IS 'true when the result scores below its format step''s min_score (the search could not reach it), false when it reaches it, NULL without a target or a score';
COMMENT ON COLUMN halcyon.jobs.result_chroma IS 'a JPEG result''s chroma sampling (4:4:4, 4:2:0, 4:2:2, 4:4:0, grey), read from its bytes; NULL for other formats';
