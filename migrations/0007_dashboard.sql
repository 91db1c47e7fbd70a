-- Halcyon 0007 (issue #19): what the dashboard's overview reads, bounded with any number of rows.
-- Failed and cancelled rows by when they finished: the overview counts them (at most a cap of
-- them) and groups the failures of the last 24 hours by code, without scanning the succeeded
-- rows, which are most of a busy table. Rows that succeed never enter this index.
CREATE INDEX jobs_unsuccessful_idx ON halcyon.jobs (finished_at) WHERE state IN ('failed', 'cancelled');
