import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonTestSupport
import Testing

@testable import HalcyonQueue

/// The query files (`Sources/HalcyonQueue/Queries/*.sql`) against their Swift side: every file
/// embedded, every named statement declared by one `Query` type, and — on a migrated database —
/// every statement prepared, its parameter count and types and its result's column names and
/// types what the Swift side writes and reads, each column read and reaching what its row type
/// decodes (`QueryChecks`).
///
/// The database checks need only a PostgreSQL (`TestEnvironment.databaseAvailable`): besides
/// `scripts/test --filter QueryFile`, `HALCYON_TEST_DATABASE_URL='host=… user=… dbname=postgres'
/// swift test --filter QueryFile` runs them against a server of one's own (each check creates a
/// database and drops it after).
@Suite struct QueryFileTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/HalcyonQueue/Queries")

    /// One call of every statement, with parameters of the right shape.
    static var samples: [any Query] {
        let claim = Claim(id: 1, attempt: 1, stamp: "2026-01-01T00:00:00.000000Z")
        let error = HalcyonError(.timeout, "timed out", permanent: false)
        let rejection = SQL.Rejection(claim: claim, workerID: "w", error: error)
        let result = JobResult(key: "k", digest: "d", path: "p", bytes: 1, width: 1, height: 1, format: "jpeg", cacheHit: false, source: "s")
        let callback = JobQueue.Callback(jobID: 1, attempt: 1, url: "http://127.0.0.1:9/", body: "{}", messageID: "m")
        let filter = JobQueue.JobFilter(
            states: [.failed, .cancelled], code: "fetch.timeout", since: .seconds(60), queue: "q", tag: "t", sourceContains: "x",
            from: Date(timeIntervalSince1970: 0), to: Date())
        let lease = SQL.DutyLease(name: .storeSweep, holder: "h", duration: .seconds(60))
        var job = JobQueue.NewJob(source: "https://example.com/a.jpg")
        job.runAt = "2026-01-01T00:00:00Z"
        job.uniqueKey = "u"
        job.tags = ["a"]
        return [
            SQL.Claim(workerID: "w", limit: 6, lease: .seconds(30), maxBytes: 1 << 26, queues: [("default", nil), ("q", 2)], siblings: true),
            SQL.DrainCheck(queues: ["default"]),
            SQL.Complete(workerID: "w", batch: [(claim, result, StageTimings())]),
            SQL.Fail(claim: claim, workerID: "w", error: error, retryDelay: .seconds(2), timings: StageTimings()),
            SQL.FailRejected(rejection: rejection),
            SQL.MarkOutcomeRejected(rejection: rejection),
            SQL.Release(claims: [claim, Claim(id: 2, attempt: 1)], workerID: "w"),
            SQL.HeartbeatJobs(claims: [claim], workerID: "w", lease: .seconds(30)),
            SQL.RecordTraceIDs(claims: [claim], workerID: "w", traceIDs: ["4bf92f3577b34da6a3ce929d0e0e4736"]),
            SQL.Rescue(scan: SQL.ExpiredScan(limit: 10, excluding: [3])),
            SQL.ExpiredLeases(scan: SQL.ExpiredScan(limit: 10, excluding: [])),
            SQL.RescueOne(id: 1),
            SQL.RegisterWorker(id: "w", host: "h", pid: 1, concurrency: 2),
            SQL.HeartbeatWorker(id: "w", done: 1, failed: 0),
            SQL.StopWorker(id: "w"),
            SQL.HeldJobs(workerID: "w"),
            SQL.RecordRestart(workerID: "w", reason: "SIGSEGV"),
            SQL.WorkerList(deadAfter: .seconds(60)),
            SQL.AcquireLease(lease: lease),
            SQL.RenewLease(lease: lease),
            SQL.ReleaseLease(name: .storeSweep, holder: "h"),
            SQL.TakeCallbacks(limit: 4, hold: .seconds(30)),
            SQL.PutBackCallback(callback: callback, dueIn: .seconds(1)),
            SQL.CallbackDueSoon(window: .seconds(5)),
            SQL.RecordCallback(callback: callback, outcome: .retry(after: .seconds(3), error: "HTTP 503")),
            SQL.Enqueue(job: job),
            SQL.ShowJob(id: 1),
            SQL.SimilarImages(hash: String(repeating: "0", count: 64), maxDistance: 31, limit: 10),
            SQL.SimilarToJob(id: 1, maxDistance: 31, dihedral: true, limit: 10),
            SQL.JobStates(ids: [1, 2]),
            SQL.Retry(ids: [1]),
            SQL.Cancel(ids: [1]),
            SQL.Now(),
            SQL.CountFiltered(filter: filter),
            SQL.RetryFiltered(batch: SQL.FilteredBatch(filter: filter, limit: 1000, asOf: "2026-01-01 00:00:00+00")),
            SQL.CancelFiltered(batch: SQL.FilteredBatch(filter: filter, limit: 1000, asOf: nil)),
            SQL.ProgressCounts(since: Date()),
            SQL.QueueDetail(),
            SQL.RecentFailures(),
            SQL.ThroughputWindows(),
            SQL.PruneBatch(states: [.succeeded, .failed], olderThan: .seconds(86400), limit: 1000),
            SQL.RecordPrune(by: "w", pruned: [.succeeded: 2], took: .milliseconds(500)),
            SQL.RollUpUsage(limit: 50_000),
            SQL.PruneUsage(olderThan: .days(400), limit: 50_000),
            SQL.UsageReport(request: UsageRequest(since: Date(), byFairKey: true, hourly: true, queue: "q", fairKey: "k", sort: .cpu)),
            SQL.LockUsageWindows(),
            SQL.ClearUsageWindow(period: "24h"),
            SQL.BuildUsageWindow(period: "24h"),
            SQL.SlideUsageWindow(period: "24h"),
            SQL.AnalyzeUsageTotals(),
            SQL.UsageWindowAgrees(period: "24h"),
            SQL.UsageTotalsReport(request: UsageRequest(since: Date(), byFairKey: true, queue: "q", sort: .cpu)),
            SQL.LatestPrune(),
            SQL.RecordSweep(
                record: JobQueue.SweepRecord(
                    sweptBy: "w", storeRoot: "/s", keptFiles: 1, keptBytes: 2, sizeLimit: nil, removedFiles: 3, removedKeys: 4, freedBytes: 5,
                    took: .milliseconds(100))),
            SQL.LatestSweep(),
            SQL.PauseQueue(queue: "q"),
            SQL.ResumeQueue(queue: "q"),
            SQL.QueueNames(),
            SQL.SetQueueLimits(queue: "q", limits: QueueLimits(maxRunning: 2, maxPerSecond: 1.5)),
            SQL.ForgetIdleFairKeys(limit: 10),
            SQL.QueueLimitsOf(queue: "q"),
            SQL.LimitedQueues(most: 10),
            SQL.LockLimitedQueues(queues: ["q"]),
            SQL.QueueIsolatesKeys(queue: "q"),
            SQL.QueueCounts(),
            SQL.TagCounts(tag: "t"),
            SQL.SetPreset(preset: Preset(name: "p", processors: "flip", options: ["expiration": "1d"])),
            SQL.ListPresets(),
            SQL.DeletePreset(name: "p"),
            SQL.PresetsNamed(names: ["p"]),
            SQL.OverviewCounts(cap: 100),
            SQL.TableEstimate(),
            SQL.SucceededCount(),
            SQL.QueueList(limit: 10),
            SQL.ThroughputByMinute(limit: 10),
            SQL.FailuresByCode(limit: 10),
            SQL.ListJobs(filter: filter, before: 10, limit: 50),
            SQL.CountFilteredCapped(filter: filter, cap: 100),
            SQL.MigrationLock(),
            SQL.CreateSchema(),
            SQL.CreateMigrationsTable(),
            SQL.MigrationsTableExists(),
            SQL.AppliedVersions(),
            SQL.RecordMigration(version: 1, file: "0001_jobs.sql"),
            SQL.Begin(),
            SQL.Commit(),
            SQL.Rollback(),
            SQL.ListenJobs(),
            SQL.ListenFinished(),
        ]
    }

    @Test func theFilesParseAndEveryOneIsEmbedded() throws {
        let parsed = try QueryLibrary.parse(Queries.files)
        #expect(parsed.count == Queries.queue.statements.count)
        let onDisk = try FileManager.default.contentsOfDirectory(atPath: Self.directory.path).filter { $0.hasSuffix(".sql") }
        #expect(Set(onDisk) == Set(Queries.files.map(\.name)), "Queries.files lists every file of \(Self.directory.path)")
        for file in Queries.files {
            let text = try String(contentsOf: Self.directory.appendingPathComponent(file.name), encoding: .utf8)
            #expect(Array(text.utf8) == file.bytes, "\(file.name) embedded as it is (rebuild)")
        }
    }

    /// Each named statement is one `Query` type, and each type names a statement: an unknown or
    /// repeated name is caught here, not at a worker's first call.
    @Test func everyStatementIsDeclaredOnce() {
        #expect(QueryChecks.declarationProblems(Self.samples, library: Queries.queue) == [])
    }

    @Test func theParserRefusesMistakes() throws {
        func statements(_ files: [(String, String)]) throws(QueryLibrary.FileError) -> [QueryLibrary.Statement] {
            try QueryLibrary.parse(files.map { ($0.0, Array($0.1.utf8)) })
        }
        let good = try statements([
            (
                "a.sql",
                "-- A file.\n\n-- name: first :one\n-- $1 a thing.\nSELECT $1::int\n  -- inside\n  AS x;\n\n-- between\n-- name: second :exec\nBEGIN ;  \n"
            )
        ])
        #expect(good.map(\.name) == ["first", "second"])
        #expect(good[0].text == "SELECT $1::int\n  -- inside\n  AS x" && good[0].kind == .one && good[0].line == 3)
        #expect(good[1].text == "BEGIN " && good[1].kind == .exec)
        #expect(QueryLibrary.slots(in: "x IN (/*states*/) /* a comment */ AND /*b*/") == ["states", "b"])
        let included = try statements([
            ("a.sql", "-- name: x :many\nSELECT 1 WHERE /*f*/ AND /*g*/;\n"),
            ("b.sql", "-- fragment: f\n-- A fragment.\na IN (/*states*/)\nAND /*g*/;\n-- fragment: g\nb;\n"),
        ])
        #expect(included.first?.text == "SELECT 1 WHERE a IN (/*states*/)\nAND b AND b" && included.first?.slots == ["states"])

        for (files, message) in [
            ([("a.sql", "-- name: x :one\nSELECT 1;\n"), ("b.sql", "-- name: x :many\nSELECT 2;\n")], "b.sql:1: 'x' is already the name of a.sql:1"),
            ([("a.sql", "-- name: x :one\nSELECT 1\n-- name: y :one\nSELECT 2;\n")], "a.sql:1: 'x' has no text ending in ';'"),
            ([("a.sql", "-- name: x :one\nSELECT 1;\nSELECT 2;\n")], "a.sql:3: text after the statement's ';'"),
            ([("a.sql", "SELECT 1;\n-- name: x :one\nSELECT 2;\n")], "a.sql:1: text before the first '-- name:' header"),
            ([("a.sql", "-- name: x :rows\nSELECT 1;\n")], "a.sql:1: expected '-- name: NAME :one|many|exec', found '-- name: x :rows'"),
            ([("a.sql", "-- name: x :one\n-- only a comment\n")], "a.sql:1: 'x' has no text ending in ';'"),
            ([("a.sql", "-- fragment: f\na;\n-- name: x :one\nSELECT 1;\n")], "a.sql:1: fragment 'f' is used by no statement"),
            ([("a.sql", "-- fragment: f x\na;\n")], "a.sql:1: expected '-- fragment: NAME', found '-- fragment: f x'"),
            ([("a.sql", "-- fragment: f\n/*f*/;\n-- name: x :one\nSELECT /*f*/;\n")], "a.sql:3: fragment 'f' includes itself"),
        ] {
            #expect(throws: QueryLibrary.FileError.self) { try statements(files) }
            do {
                _ = try statements(files)
            } catch {
                #expect(error.description == message)
            }
        }
    }

    /// What the SQL says that the Swift side says too.
    @Test func theSQLAgreesWithTheSwiftSide() {
        // A rescue's source label is `SourceLabel`'s.
        for name in ["rescue", "rescueOne"] {
            let label = "octet_length(j.source) > \(SourceLabel.maxBytes) THEN left(j.source, \(SourceLabel.keptCharacters))"
            #expect(Queries.queue.statement(name).text.contains(label))
        }
        // The channels the Swift side listens on.
        #expect(Queries.queue.statement("listenJobs").text == "LISTEN \(JobListener.channel)")
        #expect(Queries.queue.statement("listenFinished").text == "LISTEN \(JobListener.finishedChannel)")
        #expect(Queries.queue.statement("complete").text.contains("pg_notify('\(JobListener.finishedChannel)'"))
        #expect(Queries.queue.statement("resumeQueue").text.contains("pg_notify('\(JobListener.channel)'"))
    }

    /// Parameter text as PostgreSQL reads it, written in one place.
    @Test func parametersAreWrittenAsPostgreSQLReadsThem() {
        var p = QueryParameters()
        p.add(["a", "b \"c\"", "d\\e"])
        p.add([1, nil, 3] as [Int?])
        p.add([Int64(7), 8])
        p.add(["x", nil] as [String?])
        p.add(Duration.seconds(30))
        p.add(Duration.milliseconds(1500))
        p.add(true)
        p.add(nil as String?)
        #expect(p.values == [#"{"a","b \"c\"","d\\e"}"#, "{1,NULL,3}", "{7,8}", #"{"x",NULL}"#, "30.0", "1.5", "true", nil])
        #expect(PGRows.parseTextArray(p.values[0]!) == ["a", "b \"c\"", "d\\e"])
        #expect(p.kinds == [.textArray, .integerArray, .integerArray, .textArray, .float, .float, .boolean, .text])

        let none = JobQueue.JobFilter(states: [])
        #expect(SQL.CountFiltered(filter: none).text.contains("j.state IN (NULL)"))
        let two = JobQueue.JobFilter(states: [.failed, .cancelled, .failed])
        #expect(SQL.CountFiltered(filter: two).text.contains("j.state IN ('cancelled', 'failed')"))
    }

    @Test(.enabled(if: TestEnvironment.databaseAvailable, "needs a PostgreSQL: HALCYON_TEST_DATABASE_URL, or scripts/test"))
    func everyStatementPreparesWithItsParametersAndColumns() async throws {
        let problems = try await QueryChecks.preparedProblems(Self.samples)
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    /// `JobRow` defines every column of `halcyon.jobs` once, and `showJob` selects them all.
    @Test(.enabled(if: TestEnvironment.databaseAvailable, "needs a PostgreSQL: HALCYON_TEST_DATABASE_URL, or scripts/test"))
    func theJobRowIsTheTable() async throws {
        let db = try await TestDatabase.create()
        let table = try await db.query(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'halcyon' AND table_name = 'jobs' ORDER BY ordinal_position")
        try? await db.drop()
        #expect(Set(table.rows.compactMap { $0[0] }) == Set(JobRow.columns))
        #expect(table.count == JobRow.columns.count)
    }

    /// Without a database: each column the claim returns is read as its `JobRow.schema` kind and
    /// reaches the claimed `Job` (`Job.init(row:)`): a column `claimedColumns` lists but the
    /// mapping drops fails here. (The prepared check does the same against the claim's own
    /// result types.)
    @Test func everyClaimedColumnReachesTheJob() {
        // One PostgreSQL type for each kind a column is read as.
        let typeOfKind: [QueryParameters.Kind: String] = [
            .text: "text", .integer: "int8", .float: "float8", .boolean: "bool", .timestamp: "timestamptz", .json: "jsonb",
            .textArray: "_text",
        ]
        var kinds = Dictionary(uniqueKeysWithValues: JobRow.schema.map { ($0.name, $0.kind) })
        kinds["queue_wait"] = .float
        kinds["claimed_at"] = .text
        kinds["isolated_keys"] = .boolean
        let columns = SQL.Claim.Row.columns
        #expect(columns.allSatisfy { kinds[$0] != nil }, "a column of the claim's result is neither a JobRow column nor the claim's own")
        let types = columns.map { QueryChecks.ColumnType(name: kinds[$0].flatMap { typeOfKind[$0] } ?? "text") }
        let problems = QueryChecks.rowProblems(SQL.Claim.Row.self, columns: columns, types: types, words: JobState.allCases.map(\.rawValue))
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }
}
