-- Halcyon 0003: bounds on what one job row can carry, so that claiming a batch of rows is
-- cheap and bounded. (An existing row over a bound makes this migration fail, naming the
-- constraint: fix or delete that row, then migrate again.)
--
-- source: 14 MiB (a data: URL of 10 MiB, base64-encoded, and its header);
-- fallback_sources: at most 16, 14 MiB together; cache_key: 8 KiB; options: 64 KiB of JSON.
ALTER TABLE halcyon.jobs
    ADD CONSTRAINT jobs_source_length CHECK (octet_length(source) <= 14680064),
    ADD CONSTRAINT jobs_fallback_sources_size
        CHECK (cardinality(fallback_sources) <= 16 AND octet_length(array_to_string(fallback_sources, '')) <= 14680064),
    ADD CONSTRAINT jobs_cache_key_length CHECK (octet_length(cache_key) <= 8192),
    ADD CONSTRAINT jobs_options_size CHECK (octet_length(options::text) <= 65536);
