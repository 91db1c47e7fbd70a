-- s3://BUCKET/KEY sources: read by the worker from its configured S3 endpoint with its
-- credentials (docs/sources.md). The check only widens: every source valid before still is.
CREATE OR REPLACE FUNCTION halcyon.is_valid_source(src text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT src IS NOT NULL
       AND length(btrim(src)) > 0
       AND src ~* '^(https?://[^/?#\s]+|file:///[^\s]*|s3://[a-z0-9.-]{3,63}/.|data:[^,]*,.*)'
$$;
