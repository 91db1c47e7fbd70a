-- Halcyon 0010: a worker's restarts after crashes of its image process.
--
-- `halcyon work` is a supervisor whose child process does the image work; when the child dies
-- (a fault in a C library, a trap, the OOM killer, --max-memory) the supervisor records the
-- jobs it had in processing as `worker.crashed`, releases the others and starts a new child.
-- These columns say how often that happened to a worker and why it last did.
ALTER TABLE halcyon.workers
    ADD COLUMN restarts   int NOT NULL DEFAULT 0,
    ADD COLUMN last_crash text,
    ADD COLUMN crashed_at timestamptz;
