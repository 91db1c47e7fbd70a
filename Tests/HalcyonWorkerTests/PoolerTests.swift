import Foundation
import HalcyonQueue
import HalcyonSamples
import HalcyonTestSupport
import Testing

/// Behind PgBouncer in transaction pooling (`scripts/test` starts one with 4 server connections
/// shared by every client): migrations, enqueue, two workers, a sweep, wait and status all go
/// through it, with `HALCYON_POLL_ONLY=1` as README says; Halcyon's statement settings hold
/// for its statements and leak to no other client.
@Suite(.enabled(if: TestEnvironment.available && TestEnvironment.pgbouncerConninfo != nil, "needs scripts/test (PgBouncer)"), .processes(2))
struct PoolerTests {
    @Test func workersEnqueueSweepWaitAndStatusBehindPgBouncerInTransactionPooling() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pooled = TestEnvironment.pgbouncerConninfo! + " dbname=\(db.name)"
        let env = ["HALCYON_POLL_ONLY": "1"]
        func run(_ args: [String], timeout: Double = 120) async throws -> (status: Int32?, output: String) {
            let p = try HalcyonProcess(args, conninfo: pooled, environment: env)
            let status = await p.wait(timeout: timeout)
            return (status, p.output)
        }

        // Two migrations at once: each step waits for the other's (a transaction-scoped lock).
        let migrations = try (0..<2).map { _ in try HalcyonProcess(["migrate"], conninfo: pooled, environment: env) }
        for m in migrations { #expect(await m.wait(timeout: 120) == 0, "\(m.output)") }
        let files = try Migrator.load(from: TestEnvironment.migrationsDirectory)
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.schema_migrations").value(0, "n") == String(files.count))

        // Sources: a few small images, each with three chains.
        let dir = try TestEnvironment.temporaryDirectory("pooled")
        var lines: [String] = []
        for i in 0..<12 {
            let file = dir.appendingPathComponent("p\(i).jpg")
            try SampleImages.photo(width: 96 + i, height: 64, seed: UInt64(i + 1)).write(to: file)
            for chain in ["resize(32x32)", "resize(48x48, mode=fill) |> format(png)", "flip |> format(webp)"] {
                lines.append(#"{"source": "file://\#(file.path)", "processors": "\#(chain)"}"#)
            }
        }
        let jsonl = dir.appendingPathComponent("jobs.jsonl")
        try lines.joined(separator: "\n").write(to: jsonl, atomically: true, encoding: .utf8)
        let enqueued = try await run(["enqueue", "--file", jsonl.path])
        #expect(enqueued.status == 0, "\(enqueued.output)")
        #expect(enqueued.output.contains("enqueued \(lines.count) jobs"), "\(enqueued.output)")
        let ids = try await db.query("SELECT id FROM halcyon.jobs ORDER BY id").rows.compactMap { $0[0].flatMap { Int64($0) } }
        #expect(ids.count == lines.count)

        // Two workers drain them; `wait` polls meanwhile.
        let store = try TestEnvironment.temporaryDirectory("pooled-store")
        let workers = try (1...2).map { i in
            try TestWorker(
                // No sweeps of their own (the first comes 5–30 s after start): the one counted below
                // is the command's.
                [
                    "work", "--drain", "--store", store.path, "--file-root", dir.path, "--log-level", "info", "--worker-id", "pooled-\(i)",
                    "--sweep-interval", "0s",
                ],
                conninfo: pooled, environment: env)
        }
        let waited = try await run(["wait", "--timeout", "120s"] + ids.map(String.init), timeout: 150)
        #expect(waited.status == 0, "\(waited.output)")
        #expect(waited.output.split(whereSeparator: \.isNewline).filter { $0.contains(" succeeded ") }.count == ids.count, "\(waited.output)")
        for w in workers { #expect(await w.wait(timeout: 120) == 0, "\(w.output.suffix(3000))") }
        for w in workers { #expect(w.output.contains("mode=poll"), "\(w.output.prefix(2000))") }

        // A sweep takes its lease through the pooler, gives it up, and records itself.
        let swept = try await run(["sweep", "--store", store.path])
        #expect(swept.status == 0, "\(swept.output)")
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.store_sweeps").value(0, "n") == "1")
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.leases").value(0, "n") == "0")

        // The sweep's lease is a row, so it holds across the pool's server connections: while
        // another holder has it (taken through the pooler too), `sweep` waits and says so; once
        // given up, the sweep runs. A session lock would not have been seen by another client.
        let holder = try await PGConnection.connect(pooled, label: "pooled-holder")
        let other = JobQueue(connection: holder)
        #expect(try await other.acquireLease(.storeSweep, holder: "another sweep"))
        let waiting = try HalcyonProcess(["sweep", "--store", store.path], conninfo: pooled, environment: env)
        #expect(try await waitUntil(60) { waiting.output.contains("another sweep is running") }, "\(waiting.output)")
        #expect(waiting.isRunning, "the sweep did not wait for the lease: \(waiting.output)")
        try await other.releaseLease(.storeSweep, holder: "another sweep")
        await holder.close()
        #expect(await waiting.wait(timeout: 120) == 0, "\(waiting.output)")
        #expect(try await db.query("SELECT count(*) AS n FROM halcyon.store_sweeps").value(0, "n") == "2")

        // `enqueue --wait` polls through the pooler (no LISTEN) and a `--poll-only` worker
        // notices the new job.
        let waiter = try HalcyonProcess(
            ["enqueue", "file://" + dir.appendingPathComponent("p0.jpg").path, "--processors", "resize(20x20)", "--wait", "--timeout", "120s"],
            conninfo: pooled, environment: env)
        #expect(
            try await waitUntil(60) { try await db.query("SELECT count(*) AS n FROM halcyon.jobs").value(0, "n") == String(ids.count + 1) },
            "\(waiter.output)")
        let late = try TestWorker(
            [
                "work", "--drain", "--store", store.path, "--file-root", dir.path, "--worker-id", "pooled-3", "--sweep-interval", "0s",
                "--log-level", "info",
            ],
            conninfo: pooled, environment: env)
        #expect(await waiter.wait(timeout: 150) == 0, "\(waiter.output)")
        #expect(waiter.output.contains("succeeded"), "\(waiter.output)")
        #expect(await late.wait(timeout: 120) == 0, "\(late.output.suffix(2000))")
        #expect(late.output.contains("mode=poll"))

        let status = try await run(["status"])
        #expect(status.status == 0, "\(status.output)")
        #expect(status.output.contains("succeeded  \(ids.count + 1)"), "\(status.output)")

        // Halcyon's statements run with jit off; every client's session still has the server's
        // own value (a few rounds, over the pool's few server connections).
        for _ in 0..<8 {
            let halcyon = try await PGConnection.connect(pooled, label: "pooled")
            #expect(try await halcyon.execute("SELECT current_setting('jit') AS v").value(0, "v") == "off")
            await halcyon.close()
            let other = try await PGConnection.connect(pooled, label: "pooled-other", settings: .server)
            #expect(try await other.execute("SELECT current_setting('jit') AS v").value(0, "v") == "on")
            await other.close()
        }
        // And all of that went through a handful of server connections.
        let servers = try await db.query(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = '' AND pid <> pg_backend_pid()")
        #expect(Int(servers.value(0, "n") ?? "") ?? 99 <= 4, "\(servers.rows)")
    }
}
