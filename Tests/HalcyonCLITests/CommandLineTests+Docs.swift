import Foundation
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// What the documentation tells a newcomer, checked against the binary: each of these was
/// documented and not so.
extension CommandLineTests {
    /// Runs halcyon with `arguments` and `environment` over the test run's own; returns the exit
    /// status and what it printed.
    func run(
        _ arguments: [String], conninfo: String?, environment: [String: String] = [:], timeout: Double = 60
    ) async throws -> (
        status: Int32?, output: String
    ) {
        let p = try HalcyonProcess(arguments, conninfo: conninfo, environment: environment)
        return (await p.wait(timeout: timeout), p.output)
    }

    /// No database but the embedded default: the variables that would choose another set, but
    /// empty (which is not set, to Halcyon; and the embedded cluster's own tools do not see them).
    /// Not `PGSERVICE`: libpq looks an empty one up as a service named "" (scripts/test leaves
    /// it unset).
    static let noDatabase = ["DATABASE_URL": "", "PGHOST": "", "PGHOSTADDR": "", "PGPORT": "", "PGDATABASE": "", "PGUSER": ""]

    @Test func versionIsTheOneTheBinaryIsBuiltWith() async throws {
        let (status, output) = try await run(["--version"], conninfo: nil)
        #expect(status == 0, "\(output)")
        #expect(output.trimmingCharacters(in: .whitespacesAndNewlines) == HalcyonVersion.string, "\(output)")
    }

    /// docs/operating.md and `work --help` give `--max-memory` 64MiB–1PiB and the retention
    /// options 1m–36500d: every bound is accepted as written.
    @Test func theDocumentedBoundsOfTheWorkersOptionsAreAccepted() async throws {
        let db = try await TestDatabase.create()
        for options in [
            ["--max-memory", "1PiB", "--retain-succeeded", "36500d", "--retain-failed", "1m"],
            ["--max-memory", "64MiB", "--retain-succeeded", "1m", "--retain-failed", "36500d"],
        ] {
            let (status, output) = try await run(["work", "--drain", "--no-progress"] + options, conninfo: db.conninfo)
            #expect(status == 0, "\(options): \(output)")
        }
    }

    /// The worker refuses a watermark it cannot fetch before any download; `enqueue`,
    /// `validate` and `preset set` refuse it the same way, before it reaches the table.
    @Test func aWatermarkTheWorkerRefusesIsRefusedWhereTheChainIsWritten() async throws {
        let db = try await TestDatabase.create()
        let chain = #"resize(100x100) |> watermark("ftp://images.example.com/logo.png")"#
        for arguments in [
            ["enqueue", "https://images.example.com/a.jpg", "--processors", chain], ["validate", chain], ["preset", "set", "marked", chain],
        ] {
            let (status, output) = try await run(arguments, conninfo: db.conninfo)
            #expect(status == 1, "\(arguments[0]): \(output)")
            #expect(output.contains("job.invalid_source: watermark: unsupported source scheme"), "\(arguments[0]): \(output)")
        }
        let rows = try await db.query("SELECT (SELECT count(*) FROM halcyon.jobs) + (SELECT count(*) FROM halcyon.presets) AS n")
        #expect(rows.value(0, "n") == "0", "nothing was written")
    }

    /// A directory named for the migrations or the policy that does not hold them is an error
    /// naming it, not a silent fall-back to the files beside the binary.
    @Test func aResourceDirectoryWithoutItsFilesIsAnErrorNamingIt() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let empty = try TestEnvironment.temporaryDirectory("no-files").path
        let (migrate, migrateOutput) = try await run(["migrate", "--migrations", "/nowhere"], conninfo: db.conninfo)
        #expect(migrate == 1, "\(migrateOutput)")
        #expect(migrateOutput.contains("--migrations /nowhere: /nowhere does not exist"), "\(migrateOutput)")
        #expect(!migrateOutput.contains("up to date") && !migrateOutput.contains("applied"), "\(migrateOutput)")

        let (status, statusOutput) = try await run(["migrate"], conninfo: db.conninfo, environment: ["HALCYON_MIGRATIONS": empty])
        #expect(status == 1, "\(statusOutput)")
        #expect(statusOutput.contains("HALCYON_MIGRATIONS=\(empty): \(empty) has no 0001_jobs.sql"), "\(statusOutput)")

        let migrated = try await TestDatabase.create()
        // The test process's own ImageMagick has set MAGICK_CONFIGURE_PATH, which would win.
        let (work, workOutput) = try await run(
            ["work", "--drain"], conninfo: migrated.conninfo, environment: ["HALCYON_POLICY_DIR": empty, "MAGICK_CONFIGURE_PATH": ""])
        #expect(work == 64, "\(workOutput)")
        #expect(workOutput.contains("HALCYON_POLICY_DIR=\(empty): \(empty) has no policy.xml"), "\(workOutput)")
        #expect(!workOutput.contains("worker started"), "\(workOutput)")
    }

    /// `validate` of a chain naming a preset, with no database configured, creates none.
    @Test func validateWithAPresetCreatesNoDatabase() async throws {
        let home = try TestEnvironment.temporaryDirectory("validate-home")
        let (status, output) = try await run(
            ["validate", "preset(small)"], conninfo: nil, environment: Self.noDatabase.merging(["HALCYON_HOME": home.path]) { $1 })
        #expect(status == 1, "\(output)")
        #expect(output.contains("presets (small)") && output.contains("--database-url, DATABASE_URL or the PG* variables"), "\(output)")
        #expect(!FileManager.default.fileExists(atPath: home.appendingPathComponent("pg").path), "validate created \(home.path)/pg")
    }

    /// "No job" and a failed connection say which database was asked, without its password.
    @Test func messagesNameTheDatabaseTheyUsed() async throws {
        let db = try await TestDatabase.create()
        let (show, showOutput) = try await run(["show", "424242"], conninfo: nil, environment: ["DATABASE_URL": db.conninfo])
        #expect(show == 1, "\(showOutput)")
        #expect(showOutput.contains("no job 424242 in the database DATABASE_URL names (host="), "\(showOutput)")
        #expect(showOutput.contains("dbname=\(db.name)"), "\(showOutput)")

        let (wait, waitOutput) = try await run(["wait", "424242", "--timeout", "0s"], conninfo: db.conninfo)
        #expect(wait == 1 && waitOutput.contains("no job 424242 in the database --database-url names ("), "\(waitOutput)")
        let (cancel, cancelOutput) = try await run(["cancel", "424242"], conninfo: db.conninfo)
        #expect(cancel == 1 && cancelOutput.contains("no such job in the database --database-url names ("), "\(cancelOutput)")

        let (connect, connectOutput) = try await run(
            ["status"], conninfo: nil, environment: ["DATABASE_URL": "postgresql://bob:s3cret-word@127.0.0.1:1/app"])
        #expect(connect == 1, "\(connectOutput)")
        #expect(
            connectOutput.contains("cannot connect to the database DATABASE_URL names (postgresql://bob:***@127.0.0.1:1/app)"),
            "\(connectOutput)")
        #expect(!connectOutput.contains("s3cret-word"), "\(connectOutput)")

        let (pg, pgOutput) = try await run(
            ["status"], conninfo: nil,
            environment: Self.noDatabase.merging(["PGHOST": "/nonexistent-halcyon-socket-dir", "PGUSER": "bob", "PGPASSWORD": "s3cret-word"]) { $1 }
        )
        #expect(pg == 1, "\(pgOutput)")
        #expect(
            pgOutput.contains("cannot connect to the database the PG* variables name (PGHOST=/nonexistent-halcyon-socket-dir PGUSER=bob)"),
            "\(pgOutput)")
        #expect(!pgOutput.contains("s3cret-word"), "\(pgOutput)")

        // The embedded default, made by this very command: the usual reason a job is not there.
        let home = try TestEnvironment.temporaryDirectory("show-home")
        let embedded = Self.noDatabase.merging(["HALCYON_HOME": home.path]) { $1 }
        let (fresh, freshOutput) = try await run(["show", "2"], conninfo: nil, environment: embedded, timeout: 120)
        let (again, againOutput) = try await run(["show", "2"], conninfo: nil, environment: embedded, timeout: 120)
        _ = try await run(["embedded", "stop"], conninfo: nil, environment: embedded, timeout: 120)
        #expect(fresh == 1 && freshOutput.contains("no job 2 in the embedded cluster at \(home.path)/pg, just created"), "\(freshOutput)")
        #expect(again == 1 && againOutput.contains("no job 2 in the embedded cluster at \(home.path)/pg\n"), "\(againOutput)")
    }

    /// A metrics port another process holds ends `work` at start, naming the option and the
    /// address rather than the socket call.
    @Test func aMetricsPortInUseNamesTheOptionAndTheAddress() async throws {
        let db = try await TestDatabase.create()
        let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(holder) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(holder, $0, length) == 0 && getsockname(holder, $0, &length) == 0 }
        }
        try #require(bound && listen(holder, 1) == 0)
        let port = Int(UInt16(bigEndian: address.sin_port))
        let (status, output) = try await run(["work", "--drain", "--metrics-port", "\(port)"], conninfo: db.conninfo)
        #expect(status != 0, "\(output)")
        #expect(output.contains("--metrics-port \(port): address 127.0.0.1:\(port) is in use"), "\(output)")
        #expect(!output.contains("bind("), "\(output)")
    }

    /// `migrate --help` says what `Migrator.migrate` does: every pending migration in one
    /// transaction, which first takes a transaction-scoped advisory lock. `sweep --help` names
    /// the lease sweeps take turns by, not the advisory lock they once did.
    @Test func migrateAndSweepHelpSayWhatTheyDo() async throws {
        let (status, output) = try await run(["migrate", "--help"], conninfo: nil)
        let text = output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(status == 0)
        #expect(text.contains("all in one transaction") && text.contains("transaction-scoped advisory lock"), "\(output)")
        #expect(!text.contains("each in a transaction"), "\(output)")

        let (sweep, sweepOutput) = try await run(["sweep", "--help"], conninfo: nil)
        let sweepText = sweepOutput.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(sweep == 0)
        #expect(sweepText.contains("the store_sweep lease in halcyon.leases") && !sweepText.contains("advisory lock"), "\(sweepOutput)")
    }
}
