-- Halcyon 0005 (issue #18): facts about each job's source and the placeholders of its result,
-- written by the worker with the result. Additive: existing rows keep NULLs.

ALTER TABLE halcyon.jobs
    ADD COLUMN source_width  int,
    ADD COLUMN source_height int,
    ADD COLUMN source_format text,
    ADD COLUMN source_bytes  bigint,
    -- orientation, has_alpha, frames, and when present: profile, camera_make, camera_model,
    -- captured_at, has_gps (and gps {latitude, longitude} only with options.keep_gps).
    ADD COLUMN source_meta   jsonb,
    -- blurhash, thumbhash, dominant_color: those options.placeholders asked for.
    ADD COLUMN placeholders  jsonb;

COMMENT ON COLUMN halcyon.jobs.source_width IS 'the source''s width as displayed (EXIF orientation applied), full resolution';
COMMENT ON COLUMN halcyon.jobs.source_meta IS 'facts about the source: orientation, has_alpha, frames, profile, camera_make, camera_model, captured_at, has_gps (gps only with options.keep_gps)';
COMMENT ON COLUMN halcyon.jobs.placeholders IS 'what options.placeholders asked for: blurhash, thumbhash (base64), dominant_color (#rrggbb)';
