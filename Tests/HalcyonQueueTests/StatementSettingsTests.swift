import Foundation
import HalcyonTestSupport
import Testing

@testable import HalcyonQueue

/// `jit = off` on Halcyon's statements, without touching the session.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct StatementSettingsTests {
    @Test func everyStatementRunsWithJITOffAndTheSessionKeepsItsOwn() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let halcyon = try await db.connect()
        defer { Task { await halcyon.close() } }
        #expect(try await halcyon.execute("SELECT current_setting('jit') AS v").value(0, "v") == "off")
        // Parameters, and a statement that fails, go through the same pipeline.
        #expect(try await halcyon.execute("SELECT $1::int + 1 AS v, current_setting('jit') AS j", ["41"]).value(0, "v") == "42")
        await #expect(throws: DatabaseError.self) { try await halcyon.execute("SELECT 1 / $1::int", ["0"]) }
        #expect(try await halcyon.execute("SELECT current_setting('jit') AS v").value(0, "v") == "off")
        // Scripts too, for all their statements.
        try await halcyon.executeScript("SELECT 1; CREATE TEMP TABLE seen AS SELECT current_setting('jit') AS v")
        #expect(try await halcyon.execute("SELECT v FROM seen").value(0, "v") == "off")

        // Inside a transaction block the settings hold from its BEGIN; a failed block still rolls back.
        try await halcyon.execute("BEGIN")
        #expect(try await halcyon.execute("SELECT current_setting('jit') AS v").value(0, "v") == "off")
        await #expect(throws: DatabaseError.self) { try await halcyon.execute("SELECT 1 / 0") }
        try await halcyon.execute("ROLLBACK")
        #expect(try await halcyon.execute("SELECT 1 AS v").value(0, "v") == "1")

        // The session's own value is untouched: a statement after the COMMIT of a block (in the
        // same script, so nothing is sent before it) sees the server's value.
        try await halcyon.execute("BEGIN")
        try await halcyon.executeScript("COMMIT; CREATE TEMP TABLE after_commit AS SELECT current_setting('jit') AS v")
        #expect(try await halcyon.execute("SELECT v FROM after_commit").value(0, "v") == "on")
        // Commands that cannot run in a transaction are sent alone.
        try await halcyon.execute("VACUUM after_commit")
    }

    @Test func aPlanPastTheJITThresholdIsNotCompiled() async throws {
        let db = try await TestDatabase.create(migrated: false)
        guard try await db.query("SELECT pg_jit_available() AS a").value(0, "a") == "t" else { return }
        // Any plan passes a zero threshold; with the server's settings it is compiled.
        let server = try await PGConnection.connect(db.conninfo, label: "server", settings: .server)
        let halcyon = try await PGConnection.connect(db.conninfo, label: "halcyon")
        defer {
            Task {
                await server.close(); await halcyon.close()
            }
        }
        let query = "EXPLAIN (ANALYZE, FORMAT JSON) SELECT sum(g) FROM generate_series(1, 1000) AS g"
        for c in [server, halcyon] { try await c.executeScript("SET jit_above_cost = 0") }
        #expect(try await server.execute(query).rows[0][0]?.contains("\"JIT\"") == true)
        #expect(try await halcyon.execute(query).rows[0][0]?.contains("\"JIT\"") == false)
    }
}

/// Which statements the settings go with.
struct StatementKeywordTests {
    @Test func theFirstKeywordIsReadPastSpaceAndComments() {
        #expect(StatementSettings.firstKeyword(of: "  select 1") == "select")
        #expect(StatementSettings.firstKeyword(of: "-- a comment\n  WITH x AS (SELECT 1) SELECT * FROM x") == "with")
        #expect(StatementSettings.firstKeyword(of: "/* a /* nested */ comment */UPDATE t SET a = 1") == "update")
        #expect(StatementSettings.firstKeyword(of: "(SELECT 1) UNION (SELECT 2)") == "select")
        #expect(StatementSettings.firstKeyword(of: "") == nil)
        #expect(StatementSettings.firstKeyword(of: "/* unterminated") == nil)
        #expect(StatementSettings.firstKeyword(of: "-- only a comment") == nil)
    }

    @Test func queriesAndBlocksGetTheSettingsOtherCommandsDoNot() {
        for sql in ["SELECT 1", "with a as (select 1) select 1", "INSERT INTO t VALUES (1)", "EXPLAIN SELECT 1", "BEGIN", "delete from t"] {
            #expect(StatementSettings.applies(to: sql), "\(sql)")
        }
        for sql in ["CREATE DATABASE x", "VACUUM t", "LISTEN halcyon_jobs", "COMMIT", "ROLLBACK", "SET x = 1", "selectx"] {
            #expect(!StatementSettings.applies(to: sql), "\(sql)")
        }
    }
}
