-- Retrying failed or cancelled jobs with unique keys requeues, of several rows with one key,
-- only the newest: a lookup per row of the newest failed or cancelled row with its key. Without
-- an index that lookup scans the table, and a bulk retry was quadratic (a 1,000-row batch took
-- seconds at 30k rows). This index holds only finished-unsuccessful rows that have a key.
CREATE INDEX jobs_unique_key_unsuccessful_idx ON halcyon.jobs (unique_key, id)
    WHERE unique_key IS NOT NULL AND state IN ('failed', 'cancelled');
