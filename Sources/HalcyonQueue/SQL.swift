/// Every statement the queue runs, named. Parameters are positional and documented per query.
enum SQL {
    // MARK: Migrations

    /// Advisory lock key held while migrating ("HALC" + 1).
    static let migrationLockKey = "1212238915001"

    /// Advisory lock key held by whoever sweeps the store ("HALC" + 2): one sweeper at a time.
    static let sweepLockKey = "1212238915002"
    /// Records a sweep and keeps 30 days of them. $1 swept_by, $2 store root, $3 kept files,
    /// $4 kept bytes, $5 size limit (null: none), $6 removed files, $7 removed keys, $8 freed
    /// bytes, $9 seconds.
    static let recordSweep = """
        WITH old AS (DELETE FROM halcyon.store_sweeps WHERE at < now() - interval '30 days')
        INSERT INTO halcyon.store_sweeps (swept_by, store_root, kept_files, kept_bytes, size_limit, removed_files, removed_keys, freed_bytes, seconds)
        VALUES ($1, $2, $3::bigint, $4::bigint, $5::bigint, $6::bigint, $7::bigint, $8::bigint, $9::float8)
        """

    /// The latest sweep, for `halcyon status`.
    static let latestSweep = """
        SELECT at, swept_by, store_root, kept_files, kept_bytes, size_limit, freed_bytes,
               extract(epoch FROM now() - at)::float8 AS age
        FROM halcyon.store_sweeps ORDER BY at DESC LIMIT 1
        """

    static let trySweepLock = "SELECT pg_try_advisory_lock(\(sweepLockKey)) AS locked"
    static let sweepLock = "SELECT pg_advisory_lock(\(sweepLockKey))"
    static let sweepUnlock = "SELECT pg_advisory_unlock(\(sweepLockKey))"

    static let migrationBootstrap = """
        CREATE SCHEMA IF NOT EXISTS halcyon;
        CREATE TABLE IF NOT EXISTS halcyon.schema_migrations (
            version    int PRIMARY KEY,
            name       text NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
        );
        """
    static let appliedVersions = "SELECT version FROM halcyon.schema_migrations ORDER BY version"
    /// $1 version, $2 name.
    static let recordMigration = "INSERT INTO halcyon.schema_migrations (version, name) VALUES ($1::int, $2)"

    // MARK: Claim, lease, finish

    /// Entries `errors` keeps: the latest, so a job retried for a long time does not grow its
    /// row without end.
    static let keptErrors = 50

    /// `column` without its oldest entries, leaving room for one more within `keptErrors`.
    static func keepLatestErrors(_ column: String) -> String {
        "(CASE WHEN jsonb_array_length(\(column)) >= \(keptErrors) THEN \(column) - 0 ELSE \(column) END)"
    }

    /// $1 worker id, $2 batch size, $3 lease seconds, $4 most bytes of row text (source,
    /// fallbacks, options) to claim at once: rows past it (in claim order) stay queued, but the
    /// first is always claimed.
    static let claim = """
        WITH next AS (
            SELECT id, priority, run_at,
                   octet_length(source) + octet_length(array_to_string(fallback_sources, '')) + octet_length(options::text) AS size
            FROM halcyon.jobs
            WHERE state = 'queued' AND run_at <= now()
            ORDER BY priority DESC, run_at, id
            LIMIT $2::int
            FOR UPDATE SKIP LOCKED
        ), chosen AS (
            SELECT id FROM (
                SELECT id, sum(size) OVER w AS total, row_number() OVER w AS n
                FROM next WINDOW w AS (ORDER BY priority DESC, run_at, id)
            ) sized
            WHERE n = 1 OR total <= $4::bigint
        )
        UPDATE halcyon.jobs j
        SET state = 'running', attempt = j.attempt + 1, locked_by = $1,
            locked_until = now() + make_interval(secs => $3::float8), started_at = now()
        FROM chosen
        WHERE j.id = chosen.id
        RETURNING j.id, j.source, j.fallback_sources, j.processors, j.cache_key, j.options::text AS options,
                  j.priority, j.attempt, j.max_attempts,
                  extract(epoch FROM (now() - j.run_at))::float8 AS queue_wait
        """

    /// Renews the leases of held claims. $1 job ids (bigint[]), $2 their attempts (int[]),
    /// $3 worker id, $4 lease seconds. Rows another session has locked (an operator's
    /// `SELECT … FOR UPDATE`, a `cancel` in progress) are skipped rather than waited for, so one
    /// locked row cannot hold back every other lease. Returns each claim still ours (in the
    /// statement's snapshot) with whether its lease was renewed; a claim not returned is no
    /// longer ours (cancelled, rescued, or claimed again as a later attempt).
    static let heartbeatJobs = """
        WITH claims AS (
            SELECT * FROM unnest($1::bigint[], $2::int[]) AS c(id, attempt)
        ), lockable AS (
            SELECT j.id FROM halcyon.jobs j JOIN claims c ON c.id = j.id AND c.attempt = j.attempt
            WHERE j.state = 'running' AND j.locked_by = $3
            FOR UPDATE OF j SKIP LOCKED
        ), renewed AS (
            UPDATE halcyon.jobs j SET locked_until = now() + make_interval(secs => $4::float8)
            FROM lockable WHERE j.id = lockable.id
            RETURNING j.id
        )
        SELECT c.id, (r.id IS NOT NULL) AS renewed
        FROM claims c
        JOIN halcyon.jobs j ON j.id = c.id AND j.attempt = c.attempt AND j.state = 'running' AND j.locked_by = $3
        LEFT JOIN renewed r ON r.id = c.id
        """

    /// Records many successes in one statement (group commit). $1 worker id, $2 a JSON array of
    /// {id, attempt, result_key, result_digest, result_path, result_bytes, result_width,
    /// result_height, result_format, cache_hit, result_source, timings}. Returns the ids still
    /// ours (this worker, this attempt), now succeeded.
    static let complete = """
        UPDATE halcyon.jobs AS j
        SET state = 'succeeded', locked_by = NULL, locked_until = NULL, finished_at = now(),
            result_key = r.result_key, result_digest = r.result_digest, result_path = r.result_path,
            result_bytes = r.result_bytes, result_width = r.result_width, result_height = r.result_height,
            result_format = r.result_format, cache_hit = r.cache_hit, result_source = r.result_source, timings = r.timings
        FROM jsonb_to_recordset($2::jsonb) AS r(id bigint, attempt int, result_key text, result_digest text, result_path text,
             result_bytes bigint, result_width int, result_height int, result_format text, cache_hit boolean,
             result_source text, timings jsonb)
        WHERE j.id = r.id AND j.attempt = r.attempt AND j.state = 'running' AND j.locked_by = $1
        RETURNING j.id
        """

    /// $1 id, $2 worker id, $3 error entry (jsonb without `at`/`attempt`), $4 last_error text,
    /// $5 permanent (bool), $6 retry delay seconds, $7 stage timings (jsonb), $8 the attempt.
    /// Returns the new state.
    static let fail = """
        UPDATE halcyon.jobs
        SET state = CASE WHEN $5::boolean OR attempt >= max_attempts THEN 'failed' ELSE 'queued' END::halcyon.job_state,
            run_at = CASE WHEN $5::boolean OR attempt >= max_attempts THEN run_at
                          ELSE now() + make_interval(secs => $6::float8) END,
            finished_at = CASE WHEN $5::boolean OR attempt >= max_attempts THEN now() END,
            locked_by = NULL, locked_until = NULL,
            errors = \(keepLatestErrors("errors")) || jsonb_build_array(
                jsonb_build_object('at', now(), 'attempt', attempt) || $3::jsonb),
            last_error = $4, timings = $7::jsonb
        WHERE id = $1::bigint AND attempt = $8::int AND state = 'running' AND locked_by = $2
        RETURNING state::text, run_at
        """

    /// Notes on a held claim that the database refused its outcome, leaving it `running` (its
    /// lease lapses and the rescue takes it from there). $1 id, $2 attempt, $3 worker id,
    /// $4 error entry (jsonb without `at`/`attempt`), $5 last_error text.
    static let markOutcomeRejected = """
        UPDATE halcyon.jobs
        SET errors = \(keepLatestErrors("errors")) || jsonb_build_array(jsonb_build_object('at', now(), 'attempt', attempt) || $4::jsonb),
            last_error = $5
        WHERE id = $1::bigint AND attempt = $2::int AND state = 'running' AND locked_by = $3
        RETURNING id
        """

    /// Puts unfinished jobs back without spending their attempt. $1 ids (bigint[]), $2 their
    /// attempts (int[]), $3 worker id.
    static let release = """
        UPDATE halcyon.jobs j
        SET state = 'queued', attempt = greatest(j.attempt - 1, 0), locked_by = NULL, locked_until = NULL,
            run_at = now()
        FROM unnest($1::bigint[], $2::int[]) AS c(id, attempt)
        WHERE j.id = c.id AND j.attempt = c.attempt AND j.state = 'running' AND j.locked_by = $3
        RETURNING j.id
        """

    /// What a rescue sets on a row whose lease ended: back to `queued` (or `failed` when out of
    /// attempts) with a `worker.lease_expired` entry.
    private static let rescueSet = """
        SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'failed' ELSE 'queued' END::halcyon.job_state,
            finished_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
            run_at = now(),
            errors = \(keepLatestErrors("j.errors")) || jsonb_build_array(jsonb_build_object(
                'at', now(), 'attempt', j.attempt, 'code', 'worker.lease_expired', 'source', j.source,
                'message', format('worker %s stopped renewing its lease (ended %s)', j.locked_by, j.locked_until))),
            last_error = format('worker.lease_expired: worker %s stopped renewing its lease', j.locked_by),
            locked_by = NULL, locked_until = NULL
        """

    /// Requeues (or fails, when out of attempts) running jobs whose lease ended. $1 batch size,
    /// $2 ids to leave out (bigint[]: rows the database refused to rescue a moment ago).
    static let rescue = """
        WITH expired AS (
            SELECT id FROM halcyon.jobs
            WHERE state = 'running' AND locked_until < now() AND NOT (id = ANY($2::bigint[]))
            ORDER BY locked_until
            LIMIT $1::int
            FOR UPDATE SKIP LOCKED
        )
        UPDATE halcyon.jobs j
        \(rescueSet)
        FROM expired
        WHERE j.id = expired.id
        RETURNING j.id, j.state::text, j.locked_by
        """

    /// The running rows whose lease ended, for a rescue one row at a time. $1 batch size, $2 ids
    /// to leave out.
    static let expiredLeases = """
        SELECT id FROM halcyon.jobs
        WHERE state = 'running' AND locked_until < now() AND NOT (id = ANY($2::bigint[]))
        ORDER BY locked_until
        LIMIT $1::int
        """

    /// `rescue` for one row. $1 id.
    static let rescueOne = """
        UPDATE halcyon.jobs j
        \(rescueSet)
        WHERE j.id = $1::bigint AND j.state = 'running' AND j.locked_until < now()
        RETURNING j.id, j.state::text, j.locked_by
        """

    /// $1 = true when some job is runnable now, $2 = true when any job is running.
    static let drainCheck = """
        SELECT EXISTS (SELECT 1 FROM halcyon.jobs WHERE state = 'queued' AND run_at <= now()) AS runnable,
               EXISTS (SELECT 1 FROM halcyon.jobs WHERE state = 'running') AS running
        """

    // MARK: Workers

    /// $1 id, $2 host, $3 pid, $4 concurrency.
    static let registerWorker = """
        INSERT INTO halcyon.workers (id, host, pid, concurrency)
        VALUES ($1, $2, $3::int, $4::int)
        ON CONFLICT (id) DO UPDATE
        SET host = EXCLUDED.host, pid = EXCLUDED.pid, concurrency = EXCLUDED.concurrency,
            started_at = now(), heartbeat_at = now(), stopped_at = NULL
        """
    /// $1 id, $2 jobs done since the last heartbeat, $3 jobs failed since the last heartbeat.
    static let heartbeatWorker = """
        UPDATE halcyon.workers
        SET heartbeat_at = now(), jobs_done = jobs_done + $2::bigint, jobs_failed = jobs_failed + $3::bigint
        WHERE id = $1
        """
    /// $1 id.
    static let stopWorker = "UPDATE halcyon.workers SET stopped_at = now(), heartbeat_at = now() WHERE id = $1"

    // MARK: Administration

    /// $1 source, $2 processors, $3 cache_key, $4 fallback_sources (text[]), $5 options (jsonb),
    /// $6 priority, $7 max_attempts, $8 run_at (NULL = now).
    static let enqueue = """
        SELECT halcyon.enqueue(source => $1, processors => $2, cache_key => $3,
                               fallback_sources => $4::text[], options => $5::jsonb,
                               priority => $6::int, max_attempts => $7::int,
                               run_at => coalesce($8::timestamptz, now())) AS id
        """

    /// $1 id.
    /// For progress lines: runnable and running jobs now, and jobs finished since $1
    /// (timestamptz). Each count reads one partial or finished_at index.
    static let progressCounts = """
        SELECT (SELECT count(*) FROM halcyon.jobs WHERE state = 'queued' AND run_at <= now()) AS runnable,
               (SELECT count(*) FROM halcyon.jobs WHERE state = 'running') AS running,
               (SELECT count(*) FROM halcyon.jobs WHERE finished_at >= $1::timestamptz AND state = 'succeeded') AS succeeded,
               (SELECT count(*) FROM halcyon.jobs WHERE finished_at >= $1::timestamptz AND state = 'failed') AS failed
        """

    static let showJob = """
        SELECT id, source, fallback_sources, processors, cache_key, options::text AS options, priority,
               state::text AS state, attempt, max_attempts, run_at, locked_by, locked_until,
               result_key, result_digest, result_path, result_bytes, result_width, result_height,
               result_format, result_source, cache_hit, errors::text AS errors, last_error,
               created_at, started_at, finished_at, timings::text AS timings
        FROM halcyon.jobs WHERE id = $1::bigint
        """

    /// Requeues failed or cancelled jobs with a fresh attempt budget. $1 ids (bigint[]).
    static let retry = """
        UPDATE halcyon.jobs
        SET state = 'queued', attempt = 0, run_at = now(), finished_at = NULL, locked_by = NULL, locked_until = NULL
        WHERE id = ANY($1::bigint[]) AND state IN ('failed', 'cancelled')
        RETURNING id
        """

    /// Cancels queued or running jobs; a running job's worker notices at its next heartbeat. $1 ids.
    static let cancel = """
        UPDATE halcyon.jobs
        SET state = 'cancelled', finished_at = now(), locked_by = NULL, locked_until = NULL
        WHERE id = ANY($1::bigint[]) AND state IN ('queued', 'running')
        RETURNING id
        """

    /// Deletes finished jobs older than $1 seconds; $2 states (text[]).
    static let prune = """
        DELETE FROM halcyon.jobs
        WHERE finished_at < now() - make_interval(secs => $1::float8) AND state::text = ANY($2::text[])
        """

    static let jobCounts = "SELECT state::text AS state, count FROM halcyon.job_counts"
    static let queueDetail = """
        SELECT count(*) FILTER (WHERE run_at <= now()) AS runnable,
               count(*) FILTER (WHERE run_at > now()) AS scheduled,
               extract(epoch FROM now() - min(run_at) FILTER (WHERE run_at <= now()))::float8 AS oldest_age
        FROM halcyon.jobs WHERE state = 'queued'
        """
    static let recentFailures = "SELECT code, count, latest_message, last_seen FROM halcyon.recent_failures LIMIT 20"
    static let throughputWindows = """
        SELECT count(*) FILTER (WHERE finished_at > now() - interval '1 minute') AS m1,
               count(*) FILTER (WHERE finished_at > now() - interval '5 minutes') AS m5,
               count(*) FILTER (WHERE finished_at > now() - interval '15 minutes') AS m15
        FROM halcyon.jobs WHERE finished_at > now() - interval '15 minutes'
        """
    /// $1 seconds without a heartbeat after which a worker counts as dead.
    static let workerList = """
        SELECT id, host, pid, concurrency, jobs_done, jobs_failed,
               extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age,
               CASE WHEN stopped_at IS NOT NULL THEN 'stopped'
                    WHEN heartbeat_at > now() - make_interval(secs => $1::float8) THEN 'live'
                    ELSE 'dead' END AS status
        FROM halcyon.workers
        WHERE stopped_at IS NULL OR stopped_at > now() - interval '1 hour'
        ORDER BY heartbeat_at DESC
        LIMIT 50
        """
}
