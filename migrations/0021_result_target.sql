-- Halcyon 0021: whether a perceptual result reached the score its chain asked for. A `format`
-- step with a min_score (quality=auto, format(auto)) whose search cannot reach it — a noise image
-- asked for 95, a max_bytes no reaching quality fits in — still succeeds with the best result it
-- found, and says so here: true when the stored result scores below the step's min_score, false
-- when it reaches it, NULL when the chain asks for no score or none could be computed (an output
-- under 8×8). Written by the worker with the result; also in webhooks (`result.target_missed`).
-- Additive: existing rows keep NULLs.
ALTER TABLE halcyon.jobs ADD COLUMN result_target_missed boolean;

COMMENT ON COLUMN halcyon.jobs.result_target_missed IS 'true when the result scores below its format step''s min_score (the search could not reach it), false when it reaches it, NULL without a target or a score';
