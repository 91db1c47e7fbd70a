-- Halcyon 0020: usage per fair key over the last 24 hours and the last 7 days, kept as running
-- totals, so that a page of a report over 300,000 keys is read through an index instead of
-- grouping every hour of every key (about a second for a day of 300,000 keys). Additive: a
-- report the totals cannot answer (another period, by the hour, by queue, one key) sums the
-- hours as before, and so does any report while a window is being built or moved.
--
-- The usage roll-up keeps them (usage.sql): it adds the events it moves to the totals of every
-- window whose hours they fall in, and once an hour moves each window on, subtracting the hours
-- that left it (a key whose hours have all left is deleted). A window not built yet — a new
-- database, a retention shorter than the window, `since` set to NULL by hand — is built from
-- the hours by the next roll-up.

-- One row per window. `since` is the first hour its totals count (hours >= since); NULL: not
-- built. The roll-up locks these rows while it changes the totals, so that one roll-up or move
-- at a time reads the hours and writes the totals, and a report sees totals and hours that agree.
CREATE TABLE halcyon.usage_windows (
    period text PRIMARY KEY,
    span   interval NOT NULL CHECK (span > interval '0'),
    since  timestamptz CHECK (isfinite(since))
);
INSERT INTO halcyon.usage_windows (period, span) VALUES ('24h', interval '24 hours'), ('7d', interval '7 days');
COMMENT ON TABLE halcyon.usage_windows IS
    'the windows of halcyon.usage_totals: since = the first hour (UTC) their totals count, NULL while not built (the usage roll-up builds it)';

-- The sums of halcyon.usage per window, queue and fair key over the window's hours (hours >=
-- since), and how many hours they came from. Counts are numeric: the hours are anyone's to write.
CREATE TABLE halcyon.usage_totals (
    period         text NOT NULL,
    queue          text NOT NULL,
    fair_key       text NOT NULL,
    hours          bigint NOT NULL,
    succeeded      numeric NOT NULL,
    failed         numeric NOT NULL,
    cancelled      numeric NOT NULL,
    retried        numeric NOT NULL,
    decode_cpu_ms  double precision NOT NULL,
    process_cpu_ms double precision NOT NULL,
    encode_cpu_ms  double precision NOT NULL,
    store_cpu_ms   double precision NOT NULL,
    bytes_fetched  numeric NOT NULL,
    bytes_stored   numeric NOT NULL,
    store_hits     numeric NOT NULL,
    PRIMARY KEY (period, queue, fair_key)
);
-- One index per order a report can ask for (`key` is the primary key's), each ending in the
-- report's tie-break (queue, fair key): a page is the index's next rows, not a sort of every key
-- (a top-N sort of 300,000 keys took 0.2–0.4 s on two cores, at offset 100,000 over a second).
CREATE INDEX usage_totals_cpu_idx ON halcyon.usage_totals
    (period, (decode_cpu_ms + process_cpu_ms + encode_cpu_ms + store_cpu_ms) DESC, queue, fair_key);
CREATE INDEX usage_totals_succeeded_idx ON halcyon.usage_totals (period, succeeded DESC, queue, fair_key);
CREATE INDEX usage_totals_failed_idx ON halcyon.usage_totals (period, (failed + cancelled) DESC, queue, fair_key);
CREATE INDEX usage_totals_fetched_idx ON halcyon.usage_totals (period, bytes_fetched DESC, queue, fair_key);
CREATE INDEX usage_totals_stored_idx ON halcyon.usage_totals (period, bytes_stored DESC, queue, fair_key);
COMMENT ON TABLE halcyon.usage_totals IS
    'halcyon.usage summed per window (halcyon.usage_windows), queue and fair key; kept by the usage roll-up';

-- The same sums per window and queue, and how many keys (totals) each has: a report's total line
-- without reading every key (0.3 s for 300,000). Kept with the totals, in the same statements.
CREATE TABLE halcyon.usage_window_sums (
    period         text NOT NULL,
    queue          text NOT NULL,
    keys           bigint NOT NULL,
    succeeded      numeric NOT NULL,
    failed         numeric NOT NULL,
    cancelled      numeric NOT NULL,
    retried        numeric NOT NULL,
    decode_cpu_ms  double precision NOT NULL,
    process_cpu_ms double precision NOT NULL,
    encode_cpu_ms  double precision NOT NULL,
    store_cpu_ms   double precision NOT NULL,
    bytes_fetched  numeric NOT NULL,
    bytes_stored   numeric NOT NULL,
    store_hits     numeric NOT NULL,
    PRIMARY KEY (period, queue)
);
COMMENT ON TABLE halcyon.usage_window_sums IS
    'halcyon.usage_totals summed per window and queue, with how many keys; kept by the usage roll-up';

-- A sum brought into bigint's range (the hours are anyone's to write): what the usage reports
-- return for counts and bytes.
CREATE FUNCTION halcyon.saturate_bigint(numeric) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT least(greatest($1, -9223372036854775808), 9223372036854775807)::bigint $$;
