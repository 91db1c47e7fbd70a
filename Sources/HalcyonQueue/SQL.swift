import HalcyonCore

/// Every statement the queue runs, named. Parameters are positional and documented per query.
enum SQL {
    // MARK: Migrations

    /// Advisory lock key held while migrating ("HALC" + 1), a transaction at a time (a
    /// transaction-scoped lock holds behind a pooler in transaction mode too).
    static let migrationLock = "SELECT pg_advisory_xact_lock(1212238915001)"

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

    // MARK: Leases

    /// Takes lease $1 for holder $2 for $3 seconds when nobody holds it, its holder's time ran
    /// out, or $2 holds it already (then it is renewed). Returns a row when $2 holds it.
    static let acquireLease = """
        INSERT INTO halcyon.leases AS l (name, holder, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3::float8))
        ON CONFLICT (name) DO UPDATE
        SET holder = excluded.holder, expires_at = excluded.expires_at,
            acquired_at = CASE WHEN l.holder = excluded.holder THEN l.acquired_at ELSE now() END
        WHERE l.holder = excluded.holder OR l.expires_at < now()
        RETURNING holder
        """

    /// Extends lease $1 of holder $2 by $3 seconds from now; no row when $2 no longer holds it.
    static let renewLease = """
        UPDATE halcyon.leases SET expires_at = now() + make_interval(secs => $3::float8)
        WHERE name = $1 AND holder = $2
        RETURNING name
        """

    /// Gives lease $1 up, if holder $2 still holds it.
    static let releaseLease = "DELETE FROM halcyon.leases WHERE name = $1 AND holder = $2"

    // MARK: Store sweeps

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
    /// first is always claimed; $5 the queues to claim from (text[]; empty: every queue) and $6
    /// at most how many from each (int[], null: the batch size). Paused queues, and queues at
    /// their limit, are left alone. Each queue is one scan of `jobs_claim_idx`; the batch is the
    /// best of them by priority. Then, when $7 is true, its siblings: queued jobs of the same
    /// source and queue among the next `claimSiblingReach` ids after a chosen one (a source's
    /// variants are enqueued together, so their ids are adjacent), at most `claimSiblingReach`
    /// of them, of rows of at most `claimSiblingMaxBytes`, in queues without a limit of the
    /// worker's own — so a source's jobs are claimed together and decoded once, even when only
    /// one slot was free.
    ///
    /// Written so that the planner's estimates stay honest however large and churned the table
    /// is (every row count it estimates is bounded by a constant it can see): each queue's scan
    /// takes at most the batch size ($2, a constant in the plan, where a per-queue limit read
    /// from a join would be guessed at a tenth of the queue); a queue's own limit is applied
    /// after (its scan may lock up to $2 rows for the statement's few milliseconds, which other
    /// workers skip); the batch is cut at $2; and a sibling search is `claimSiblingReach` probes
    /// of `jobs_pkey` by value (a range on `id` from a join is guessed at 0.5 % of the table).
    static let claim = """
        WITH wanted AS (
            SELECT q.name, least($2::int, coalesce(w.slots, $2::int)) AS slots, w.slots IS NULL AS open, q.isolated_keys
            FROM halcyon.queues q
            LEFT JOIN unnest($5::text[], $6::int[]) AS w(name, slots) ON w.name = q.name
            WHERE NOT q.paused AND (cardinality($5::text[]) = 0 OR w.name IS NOT NULL) AND coalesce(w.slots, $2::int) > 0
        ), next AS (
            SELECT n.*, w.open, w.slots FROM wanted w CROSS JOIN LATERAL (
                SELECT id, priority, run_at, source, queue,
                       octet_length(source) + octet_length(array_to_string(fallback_sources, '')) + octet_length(options::text) AS size
                FROM halcyon.jobs
                WHERE state = 'queued' AND queue = w.name AND run_at <= now()
                ORDER BY priority DESC, run_at, id
                LIMIT $2::int
                FOR UPDATE SKIP LOCKED
            ) n
        ), allowed AS (
            SELECT * FROM (
                SELECT *, row_number() OVER (PARTITION BY queue ORDER BY priority DESC, run_at, id) AS in_queue FROM next
            ) q
            WHERE in_queue <= slots
        ), chosen AS (
            SELECT id, source, queue, open, size FROM (
                SELECT id, source, queue, open, size, priority, run_at, sum(size) OVER w AS total, row_number() OVER w AS n
                FROM allowed WINDOW w AS (ORDER BY priority DESC, run_at, id)
            ) sized
            WHERE n = 1 OR total <= $4::bigint
            ORDER BY priority DESC, run_at, id
            LIMIT $2::int
        ), ids AS (
            SELECT ARRAY(SELECT id FROM chosen) AS chosen
        ), siblings AS (
            -- Looked for only after a chosen job whose next id is not chosen too (a run of
            -- chosen ids needs one look, at its end), and never locking a chosen row again.
            SELECT DISTINCT s.id FROM ids, chosen c CROSS JOIN LATERAL (
                SELECT j.id FROM halcyon.jobs j
                WHERE j.id = ANY(ARRAY[\(claimSiblingIDs("c.id"))]) AND j.id <> ALL(ids.chosen)
                  AND j.source = c.source AND j.queue = c.queue AND j.state = 'queued' AND j.run_at <= now()
                FOR UPDATE SKIP LOCKED
            ) s
            WHERE $7::bool AND c.open AND c.size <= \(claimSiblingMaxBytes) AND c.id + 1 <> ALL(ids.chosen)
            LIMIT \(claimSiblingReach)
        ), claimed AS (
            UPDATE halcyon.jobs j
            SET state = 'running', attempt = j.attempt + 1, locked_by = $1,
                locked_until = now() + make_interval(secs => $3::float8), started_at = now()
            -- By key (jobs_pkey), whatever the planner guesses of the batch's size: a join here
            -- could become a scan of the whole table when its statistics are off.
            WHERE j.id = ANY((SELECT chosen FROM ids) || ARRAY(SELECT id FROM siblings))
            RETURNING j.id, j.source, j.fallback_sources, j.processors, j.cache_key, j.options::text AS options,
                      j.priority, j.attempt, j.max_attempts, j.queue, j.run_at, \(claimStamp("j.started_at")) AS claimed_at,
                      extract(epoch FROM (now() - j.run_at))::float8 AS queue_wait
        )
        SELECT id, source, fallback_sources, processors, cache_key, options, priority, attempt, max_attempts, queue, queue_wait, claimed_at,
               (SELECT w.isolated_keys FROM wanted w WHERE w.name = claimed.queue) AS isolated_keys,
               -- The presets a chain names, read in the claim's snapshot (a chain without the
               -- word pays one strpos).
               CASE WHEN strpos(lower(processors), 'preset') > 0 THEN (
                   SELECT jsonb_object_agg(p.name, jsonb_build_object('processors', p.processors, 'options', p.options))::text
                   FROM halcyon.presets p WHERE p.name = ANY(halcyon.chain_preset_names(claimed.processors))
               ) END AS presets
        FROM claimed ORDER BY priority DESC, run_at, id
        """

    /// $1 name, $2 processors, $3 options (jsonb). Inserts or replaces; returns whether it was new.
    static let setPreset = """
        INSERT INTO halcyon.presets AS p (name, processors, options) VALUES ($1, $2, $3::jsonb)
        ON CONFLICT (name) DO UPDATE SET processors = excluded.processors, options = excluded.options, updated_at = now()
        RETURNING (xmax = 0) AS created
        """
    static let listPresets = """
        SELECT name, processors, options::text AS options, created_at, updated_at FROM halcyon.presets ORDER BY name
        """
    /// $1 name. Returns the deleted name.
    static let deletePreset = "DELETE FROM halcyon.presets WHERE name = $1 RETURNING name"

    /// A claim's stamp (`Claim.stamp`): its `started_at` as UTC text with microseconds, the same
    /// whatever the session's TimeZone and DateStyle, and read back exactly by `::timestamptz`.
    static func claimStamp(_ column: String) -> String {
        #"to_char(\#(column) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"#
    }
    /// The guard that a row is still the claim whose stamp is `stamp` (an SQL text expression; a
    /// NULL stamp matches any claim of the attempt).
    static func sameClaim(_ startedAt: String, _ stamp: String) -> String {
        "(\(stamp) IS NULL OR \(startedAt) = (\(stamp))::timestamptz)"
    }

    /// How far past a chosen job's id the claim looks for queued jobs of the same source.
    static let claimSiblingReach = 16
    /// The ids a sibling search probes after `id` (an SQL expression): each by value, so the
    /// planner counts `claimSiblingReach` rows.
    static func claimSiblingIDs(_ id: String) -> String {
        (1...claimSiblingReach).map { "\(id) + \($0)" }.joined(separator: ", ")
    }
    /// Only rows of at most this much text (source, fallbacks, options) bring siblings: the
    /// claim's byte bound ($4) stays near what it says when sources are inline data.
    static let claimSiblingMaxBytes = 64 << 10

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
    /// result_height, result_format, cache_hit, result_source, timings, source_width,
    /// source_height, source_format, source_bytes, source_meta and placeholders (JSON text)}.
    /// Returns the ids still
    /// ours (this worker, this attempt), now succeeded. Like the `jobs_finished` trigger does for
    /// failures, it sends each one's `halcyon_job_finished` and makes its webhook due — in the
    /// statement itself, which costs a third of a trigger call per row.
    static let complete = """
        WITH done AS (
            UPDATE halcyon.jobs AS j
            SET state = 'succeeded', locked_by = NULL, locked_until = NULL, finished_at = now(),
                result_key = r.result_key, result_digest = r.result_digest, result_path = r.result_path,
                result_bytes = r.result_bytes, result_width = r.result_width, result_height = r.result_height,
                result_format = r.result_format, cache_hit = r.cache_hit, result_source = r.result_source, timings = r.timings,
                source_width = r.source_width, source_height = r.source_height, source_format = r.source_format,
                source_bytes = r.source_bytes, source_meta = r.source_meta::jsonb, placeholders = r.placeholders::jsonb,
                callback_status = CASE WHEN j.options ? 'callback_url' THEN 'pending' END,
                callback_at = CASE WHEN j.options ? 'callback_url' THEN now() END,
                callback_attempts = CASE WHEN j.options ? 'callback_url' THEN 0 ELSE j.callback_attempts END,
                callback_error = NULL
            FROM jsonb_to_recordset($2::jsonb) AS r(id bigint, attempt int, result_key text, result_digest text, result_path text,
                 result_bytes bigint, result_width int, result_height int, result_format text, cache_hit boolean,
                 result_source text, timings jsonb, source_width int, source_height int, source_format text,
                 source_bytes bigint, source_meta text, placeholders text, claimed_at text)
            WHERE j.id = r.id AND j.attempt = r.attempt AND j.state = 'running' AND j.locked_by = $1
              AND \(sameClaim("j.started_at", "r.claimed_at"))
            RETURNING j.id, j.state, j.queue, j.cache_hit, j.result_key, j.result_path
        )
        SELECT id, pg_notify('\(JobListener.finishedChannel)',
                             halcyon.finished_payload(id, state, queue, cache_hit, result_key, result_path, NULL))
        FROM done
        """

    /// $1 id, $2 worker id, $3 error entry (jsonb without `at`/`attempt`), $4 last_error text,
    /// $5 permanent (bool), $6 retry delay seconds, $7 stage timings (jsonb), $8 the attempt, $9 the
    /// claim's stamp. Returns the new state.
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
        WHERE id = $1::bigint AND attempt = $8::int AND state = 'running' AND locked_by = $2 AND \(sameClaim("started_at", "$9::text"))
        RETURNING state::text, run_at
        """

    /// Fails a held claim whose outcome the database refused, for good, with that refusal's
    /// entry (`worker.outcome_rejected`). $1 id, $2 attempt, $3 worker id, $4 error entry (jsonb
    /// without `at`/`attempt`), $5 last_error text, $6 the claim's stamp.
    static let failRejected = """
        UPDATE halcyon.jobs
        SET state = 'failed', finished_at = now(), locked_by = NULL, locked_until = NULL,
            errors = \(keepLatestErrors("errors")) || jsonb_build_array(jsonb_build_object('at', now(), 'attempt', attempt) || $4::jsonb),
            last_error = $5
        WHERE id = $1::bigint AND attempt = $2::int AND state = 'running' AND locked_by = $3 AND \(sameClaim("started_at", "$6::text"))
        RETURNING id
        """

    /// Notes on a held claim that the database refused its outcome, leaving it `running` (its
    /// lease lapses and the rescue takes it from there) — when it refuses `failRejected` too.
    /// $1 id, $2 attempt, $3 worker id, $4 error entry (jsonb without `at`/`attempt`), $5
    /// last_error text, $6 the claim's stamp.
    static let markOutcomeRejected = """
        UPDATE halcyon.jobs
        SET errors = \(keepLatestErrors("errors")) || jsonb_build_array(jsonb_build_object('at', now(), 'attempt', attempt) || $4::jsonb),
            last_error = $5
        WHERE id = $1::bigint AND attempt = $2::int AND state = 'running' AND locked_by = $3 AND \(sameClaim("started_at", "$6::text"))
        RETURNING id
        """

    /// Puts unfinished jobs back without spending their attempt. $1 ids (bigint[]), $2 their
    /// attempts (int[]), $3 worker id, $4 their claims' stamps (text[], NULL elements match any).
    static let release = """
        UPDATE halcyon.jobs j
        SET state = 'queued', attempt = greatest(j.attempt - 1, 0), locked_by = NULL, locked_until = NULL,
            run_at = now()
        FROM unnest($1::bigint[], $2::int[], $4::text[]) AS c(id, attempt, stamp)
        WHERE j.id = c.id AND j.attempt = c.attempt AND j.state = 'running' AND j.locked_by = $3
          AND \(sameClaim("j.started_at", "c.stamp"))
        RETURNING j.id
        """

    /// What a rescue sets on a row whose lease ended: back to `queued` (or `failed` when out of
    /// attempts) with a `worker.lease_expired` entry.
    private static let rescueSet = """
        SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'failed' ELSE 'queued' END::halcyon.job_state,
            finished_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
            run_at = now(),
            errors = \(keepLatestErrors("j.errors")) || jsonb_build_array(jsonb_build_object(
                'at', now(), 'attempt', j.attempt, 'code', 'worker.lease_expired', 'source', \(SourceLabel.sql("j.source")),
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

    /// Whether some job is runnable now in an unpaused queue of $1 (text[]; empty: every
    /// queue), and whether any job of those queues is running. Each queue is looked at as the
    /// claim reads it (the first entry of `jobs_claim_idx` that is runnable now), so the answer
    /// costs a few index probes whether the table holds ten rows or ten million.
    static let drainCheck = """
        SELECT EXISTS (SELECT 1 FROM halcyon.queues q CROSS JOIN LATERAL (
                           SELECT 1 FROM halcyon.jobs j
                           WHERE j.state = 'queued' AND j.queue = q.name AND j.run_at <= now()
                           ORDER BY j.priority DESC, j.run_at, j.id LIMIT 1) r
                       WHERE NOT q.paused AND (cardinality($1::text[]) = 0 OR q.name = ANY($1::text[]))) AS runnable,
               EXISTS (SELECT 1 FROM halcyon.jobs
                       WHERE state = 'running' AND (cardinality($1::text[]) = 0 OR queue = ANY($1::text[]))
                       ORDER BY locked_until LIMIT 1) AS running
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

    // MARK: Supervision

    /// $1 worker id. The jobs a worker holds, each with how many times an image process died
    /// while it was in processing (its `worker.crashed` entries).
    static let heldJobs = """
        SELECT id, attempt,
               (SELECT count(*) FROM jsonb_array_elements(j.errors) e WHERE e->>'code' = 'worker.crashed') AS crashes,
               \(claimStamp("started_at")) AS claimed_at
        FROM halcyon.jobs j
        WHERE state = 'running' AND locked_by = $1
        ORDER BY id
        """
    /// $1 worker id, $2 what ended the image process.
    static let recordRestart = """
        UPDATE halcyon.workers
        SET restarts = restarts + 1, last_crash = left($2, 1000), crashed_at = now(), heartbeat_at = now()
        WHERE id = $1
        """

    // MARK: Administration

    /// $1 source, $2 processors, $3 cache_key, $4 fallback_sources (text[]), $5 options (jsonb),
    /// $6 priority, $7 max_attempts, $8 run_at (NULL = now), $9 queue, $10 unique_key, $11 tags
    /// (text[]). Returns the id and whether it is a new row (false: a duplicate unique_key).
    static let enqueue = """
        SELECT id, inserted FROM halcyon.enqueue_job(
            source => $1, processors => $2, cache_key => $3, fallback_sources => $4::text[], options => $5::jsonb,
            priority => $6::int, max_attempts => $7::int, run_at => coalesce($8::timestamptz, now()),
            queue => $9, unique_key => $10, tags => $11::text[])
        """

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
               created_at, started_at, finished_at, timings::text AS timings,
               queue, unique_key, tags, callback_status, callback_attempts, callback_error, callback_at,
               source_width, source_height, source_format, source_bytes, source_meta::text AS source_meta,
               placeholders::text AS placeholders
        FROM halcyon.jobs WHERE id = $1::bigint
        """

    /// What `retry` sets: a fresh attempt budget, runnable now.
    private static let requeueSet = "SET state = 'queued', attempt = 0, run_at = now(), finished_at = NULL, locked_by = NULL, locked_until = NULL"

    /// A failed or cancelled row that may be requeued: its unique key (if any) is not held by
    /// another unfinished job, and of several with the same key only the newest goes.
    private static let requeueable = """
        j.state IN ('failed', 'cancelled')
        AND (j.unique_key IS NULL OR (
            NOT EXISTS (SELECT 1 FROM halcyon.jobs k WHERE k.unique_key = j.unique_key AND k.state IN ('queued', 'running'))
            AND j.id = (SELECT max(k.id) FROM halcyon.jobs k WHERE k.unique_key = j.unique_key AND k.state IN ('failed', 'cancelled'))))
        """

    /// Requeues failed or cancelled jobs with a fresh attempt budget. $1 ids (bigint[]).
    static let retry = """
        UPDATE halcyon.jobs j
        \(requeueSet)
        WHERE j.id = ANY($1::bigint[]) AND \(requeueable)
        RETURNING j.id
        """

    /// Cancels queued or running jobs; a running job's worker notices at its next heartbeat. $1 ids.
    static let cancel = """
        UPDATE halcyon.jobs
        SET state = 'cancelled', finished_at = now(), locked_by = NULL, locked_until = NULL
        WHERE id = ANY($1::bigint[]) AND state IN ('queued', 'running')
        RETURNING id
        """

    /// Where the states of a filter go, as literals (`JobFilter.bind`): the planner can then use
    /// the partial index of each state, which it cannot for a parameter (an enum array's cast is
    /// not folded at plan time).
    static let filterStates = "/*states*/"

    /// Rows matching a bulk operation's filter: states in `filterStates`, $1 the last error's
    /// code (null: any), $2 seconds: finished (or, unfinished, created) within them (null: any
    /// time), $3 queue (null: any), $4 tag (null: any), $5 a substring of the source, matched
    /// literally and case-insensitively (null: any), $6 and $7 a time range [from, to) of the same
    /// instant (null: open).
    static let filter = """
        j.state IN (\(filterStates))
        AND ($1::text IS NULL OR j.errors -> -1 ->> 'code' = $1::text)
        AND ($2::float8 IS NULL OR coalesce(j.finished_at, j.created_at) >= now() - make_interval(secs => $2::float8))
        AND ($3::text IS NULL OR j.queue = $3::text)
        AND ($4::text IS NULL OR j.tags @> ARRAY[$4::text])
        AND ($5::text IS NULL OR strpos(lower(j.source), lower($5::text)) > 0)
        AND ($6::timestamptz IS NULL OR coalesce(j.finished_at, j.created_at) >= $6::timestamptz)
        AND ($7::timestamptz IS NULL OR coalesce(j.finished_at, j.created_at) < $7::timestamptz)
        """

    /// How many rows match the filter ($1–$7 as `filter`).
    static let countFiltered = "SELECT count(*) AS n FROM halcyon.jobs j WHERE \(filter)"

    /// The database's clock, which a bulk operation reads once at its start.
    static let now = "SELECT now()::text AS now"

    /// Requeues up to $8 failed or cancelled rows matching the filter ($1–$7) that finished before
    /// $9 (the operation's start: a row that fails again while the operation runs is not retried
    /// again by it); called until it returns fewer, so no statement holds many row locks for long.
    static let retryFiltered = """
        UPDATE halcyon.jobs j
        \(requeueSet)
        WHERE j.id IN (
            SELECT j.id FROM halcyon.jobs j
            WHERE \(filter) AND \(requeueable) AND coalesce(j.finished_at, j.created_at) < $9::timestamptz
            LIMIT $8::int FOR UPDATE)
        RETURNING j.id
        """

    /// Cancels up to $8 queued or running rows matching the filter ($1–$7) created before $9 (the
    /// operation's start: jobs enqueued meanwhile are left alone, so the operation ends).
    static let cancelFiltered = """
        UPDATE halcyon.jobs j
        SET state = 'cancelled', finished_at = now(), locked_by = NULL, locked_until = NULL
        WHERE j.id IN (
            SELECT j.id FROM halcyon.jobs j
            WHERE \(filter) AND j.state IN ('queued', 'running') AND coalesce(j.finished_at, j.created_at) < $9::timestamptz
            LIMIT $8::int FOR UPDATE)
        RETURNING j.id
        """

    /// Deletes up to $3 finished rows in states $1 (text[]) finished more than $2 seconds ago,
    /// oldest first, leaving rows whose webhook is still to be delivered. Returns their states.
    static let pruneBatch = """
        WITH doomed AS (
            SELECT id FROM halcyon.jobs
            WHERE finished_at < now() - make_interval(secs => $2::float8) AND state::text = ANY($1::text[])
              AND callback_status IS DISTINCT FROM 'pending'
            ORDER BY finished_at
            LIMIT $3::int
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM halcyon.jobs j USING doomed WHERE j.id = doomed.id
        RETURNING j.state::text
        """

    /// Records a retention run and keeps 30 days of them. $1 pruned_by, $2 succeeded, $3 failed,
    /// $4 cancelled, $5 seconds.
    static let recordPrune = """
        WITH old AS (DELETE FROM halcyon.row_prunes WHERE at < now() - interval '30 days')
        INSERT INTO halcyon.row_prunes (pruned_by, succeeded, failed, cancelled, seconds)
        VALUES ($1, $2::bigint, $3::bigint, $4::bigint, $5::float8)
        """

    /// The latest retention run, for `halcyon status`.
    static let latestPrune = """
        SELECT at, pruned_by, succeeded, failed, cancelled, seconds, extract(epoch FROM now() - at)::float8 AS age
        FROM halcyon.row_prunes ORDER BY at DESC LIMIT 1
        """

    // MARK: Queues

    /// $1 queue name. Returns the queue when it exists.
    static let pauseQueue = """
        UPDATE halcyon.queues SET paused = true, paused_at = coalesce(paused_at, now()) WHERE name = $1 RETURNING name
        """

    /// $1 queue name. Wakes listening workers, since the queue's jobs are claimable again.
    static let resumeQueue = """
        WITH resumed AS (UPDATE halcyon.queues SET paused = false, paused_at = NULL WHERE name = $1 RETURNING name)
        SELECT name, pg_notify('\(JobListener.channel)', '') FROM resumed
        """

    static let queueNames = "SELECT name FROM halcyon.queues ORDER BY name"

    /// Counts by queue and state (every queue, zero counts left out), with whether it is paused.
    static let queueCounts = """
        SELECT q.name AS queue, q.paused, extract(epoch FROM now() - q.paused_at)::float8 AS paused_for,
               j.state::text AS state, count(j.id) AS count
        FROM halcyon.queues q LEFT JOIN halcyon.jobs j ON j.queue = q.name
        GROUP BY q.name, q.paused, q.paused_at, j.state
        ORDER BY q.name, j.state
        """

    /// Counts by state of the jobs tagged $1.
    static let tagCounts = """
        SELECT state::text AS state, count(*) AS count FROM halcyon.jobs WHERE tags @> ARRAY[$1::text] GROUP BY state ORDER BY state
        """

    // MARK: Waiting

    /// The state and failure code of jobs $1 (bigint[]); ids not returned do not exist.
    static let jobStates = """
        SELECT id, state::text AS state, errors -> -1 ->> 'code' AS code, cache_hit, result_path
        FROM halcyon.jobs WHERE id = ANY($1::bigint[])
        """

    // MARK: Webhooks

    /// Takes up to $1 due deliveries for $2 seconds (another worker may take one again after
    /// that: a worker that died mid-delivery loses nothing), counting the attempt. Returns each
    /// job's id, this attempt, the URL and the JSON body.
    static let takeCallbacks = """
        WITH due AS (
            SELECT id FROM halcyon.jobs
            WHERE callback_status = 'pending' AND callback_at <= now()
            ORDER BY callback_at
            LIMIT $1::int
            FOR UPDATE SKIP LOCKED
        )
        UPDATE halcyon.jobs j
        SET callback_at = now() + make_interval(secs => $2::float8), callback_attempts = j.callback_attempts + 1
        FROM due WHERE j.id = due.id
        RETURNING j.id, j.callback_attempts, j.options ->> 'callback_url' AS url,
            'job_' || j.id || '_' || to_char(j.finished_at AT TIME ZONE 'UTC', 'YYYYMMDDHH24MISSUS') AS message_id,
            jsonb_build_object(
                'id', j.id, 'state', j.state, 'queue', j.queue, 'tags', j.tags, 'attempt', j.attempt,
                'finished_at', j.finished_at, 'cache_hit', j.cache_hit,
                'result', CASE WHEN j.state = 'succeeded' THEN jsonb_build_object(
                    'key', j.result_key, 'digest', j.result_digest, 'path', j.result_path, 'bytes', j.result_bytes,
                    'width', j.result_width, 'height', j.result_height, 'format', j.result_format, 'source', j.result_source) END,
                'error', CASE WHEN j.state = 'failed' THEN (j.errors -> -1) - 'sources' END
            )::text AS body
        """

    /// Puts back a delivery just taken, its attempt not spent, due in $3 seconds. $1 id, $2 the
    /// attempt taken (the row is left alone if it moved on).
    static let putBackCallback = """
        UPDATE halcyon.jobs
        SET callback_attempts = callback_attempts - 1, callback_at = now() + make_interval(secs => $3::float8)
        WHERE id = $1::bigint AND callback_attempts = $2::int AND callback_status = 'pending'
        RETURNING id
        """

    /// Whether a delivery is pending and due within $1 seconds (a draining worker waits for
    /// those). Deliveries another worker holds are due only when its hold runs out.
    static let callbackDueSoon = """
        SELECT EXISTS (
            SELECT 1 FROM halcyon.jobs WHERE callback_status = 'pending' AND callback_at <= now() + make_interval(secs => $1::float8)
        ) AS due
        """

    /// Records a delivery attempt. $1 id, $2 the attempt (the row is left alone if another
    /// attempt has been taken since), $3 'delivered', 'pending' (retry) or 'failed', $4 error
    /// text (null when delivered), $5 seconds until the retry.
    static let recordCallback = """
        UPDATE halcyon.jobs
        SET callback_status = $3, callback_error = $4,
            callback_at = CASE WHEN $3 = 'pending' THEN now() + make_interval(secs => $5::float8) ELSE now() END
        WHERE id = $1::bigint AND callback_status = 'pending' AND callback_attempts = $2::int
        RETURNING id
        """

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
        SELECT id, host, pid, concurrency, jobs_done, jobs_failed, restarts, last_crash,
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
