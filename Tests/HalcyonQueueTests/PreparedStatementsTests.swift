import Foundation
import HalcyonTestSupport
import Testing

@testable import HalcyonQueue

/// A preparing connection's named prepared statements, on a real server.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct PreparedStatementsTests {
    static let sum = "SELECT $1::int + 1 AS v, current_setting('jit') AS jit"
    static let listed = "SELECT count(*) AS n FROM pg_prepared_statements WHERE name = $1"

    @Test func eachStatementIsParsedOncePerSessionAndItsGenericPlanReused() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let c = try await PGConnection.connect(db.conninfo, label: "prepared", preparing: true)
        defer { Task { await c.close() } }
        for n in 0..<12 {
            let rows = try await c.execute(Self.sum, [String(n)])
            #expect(rows.value(0, "v") == String(n + 1))
            #expect(rows.value(0, "jit") == "off", "the settings still go first")
        }
        let name = PreparedStatements.name(of: Self.sum)
        let row = try await c.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1", [name])
        #expect(row.value(0, "statement") == Self.sum)
        // Five custom plans, then the generic one for good: planned once, not twelve times.
        #expect(Int(row.value(0, "generic_plans") ?? "") ?? 0 >= 6)
        #expect(Int(row.value(0, "custom_plans") ?? "") ?? 99 <= 5)
        // The settings statement is prepared too; a transaction's BEGIN and utility commands are not.
        #expect(try await c.execute(Self.listed, [PreparedStatements.name(of: c.settings.prefix!)]).value(0, "n") == "1")
        try await c.execute("BEGIN")
        #expect(try await c.execute(Self.sum, ["1"]).value(0, "v") == "2")
        try await c.execute("COMMIT")
        #expect(try await c.execute(Self.listed, [PreparedStatements.name(of: "BEGIN")]).value(0, "n") == "0")
    }

    @Test func aConnectionThatDoesNotPrepareLeavesNothingInTheSession() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let c = try await PGConnection.connect(db.conninfo, label: "plain")
        defer { Task { await c.close() } }
        for n in 0..<3 { _ = try await c.execute(Self.sum, [String(n)]) }
        #expect(try await c.execute("SELECT count(*) AS n FROM pg_prepared_statements").value(0, "n") == "0")
    }

    @Test func failuresAreTheStatementsAndTheConnectionGoesOn() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let c = try await PGConnection.connect(db.conninfo, label: "prepared", preparing: true)
        defer { Task { await c.close() } }
        // A statement that does not parse fails as itself, and nothing is recorded as prepared.
        let broken = "SELECT FROM WHERE 1"
        await #expect(throws: DatabaseError.self) { try await c.execute(broken) }
        #expect(try await c.execute(Self.listed, [PreparedStatements.name(of: broken)]).value(0, "n") == "0")
        // One that fails at run time, first time and when prepared.
        for _ in 0..<2 {
            let error = await #expect(throws: DatabaseError.self) { try await c.execute("SELECT 1 / $1::int AS v", ["0"]) }
            #expect(error?.sqlState == "22012")
        }
        #expect(try await c.execute("SELECT 1 / $1::int AS v", ["1"]).value(0, "v") == "1")
    }

    @Test func aSessionThatLostItsStatementsIsServedUnprepared() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let c = try await PGConnection.connect(db.conninfo, label: "prepared", preparing: true)
        defer { Task { await c.close() } }
        #expect(try await c.execute(Self.sum, ["1"]).value(0, "v") == "2")
        // What a pooler's reset, or another client of a shared session, would do.
        try await c.executeScript("DEALLOCATE ALL")
        #expect(try await c.execute(Self.sum, ["2"]).value(0, "v") == "3", "sent again, unprepared")
        // The connection prepares nothing more.
        #expect(try await c.execute("SELECT 7 AS v").value(0, "v") == "7")
        #expect(try await c.execute("SELECT count(*) AS n FROM pg_prepared_statements").value(0, "n") == "0")
    }

    @Test func aNameTheSessionHasAlreadyNeverRunsAnotherStatement() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let c = try await PGConnection.connect(db.conninfo, label: "prepared", preparing: true)
        defer { Task { await c.close() } }
        // The name this statement would take, already taken by something else in the session.
        let name = PreparedStatements.name(of: Self.sum)
        try await c.executeScript("PREPARE \(name)(int) AS SELECT 'wrong' AS v, 'wrong' AS jit")
        let rows = try await c.execute(Self.sum, ["41"])
        #expect(rows.value(0, "v") == "42")
        #expect(rows.value(0, "jit") == "off")
    }

    @Test func aNewSessionPreparesAgain() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let c = try await PGConnection.connect(db.conninfo, label: "prepared", preparing: true)
        defer { Task { await c.close() } }
        let pid = try #require(try await c.execute("SELECT pg_backend_pid() AS p").value(0, "p"))
        _ = try await c.execute(Self.sum, ["1"])
        _ = try await db.query("SELECT pg_terminate_backend(\(pid))")
        // The statement that finds the connection gone fails as lost; the next reconnects.
        var answer: String?
        for _ in 0..<20 where answer == nil {
            answer = try? await c.execute(Self.sum, ["1"]).value(0, "v")
            if answer == nil { try await Task.sleep(for: .milliseconds(300)) }
        }
        #expect(answer == "2")
        #expect(try await c.execute("SELECT pg_backend_pid() AS p").value(0, "p") != pid)
        #expect(try await c.execute(Self.listed, [PreparedStatements.name(of: Self.sum)]).value(0, "n") == "1")
    }
}

/// The names, and the bound on how many a session gets.
struct PreparedStatementNameTests {
    @Test func oneTextOneNameAndOnlyPlannedStatements() {
        let a = PreparedStatements.name(of: "SELECT 1"), b = PreparedStatements.name(of: "SELECT 2")
        #expect(a == PreparedStatements.name(of: "SELECT 1"))
        #expect(a != b)
        #expect(a.hasPrefix("halcyon_") && a.count <= 63, "a PostgreSQL identifier")
        var none = PreparedStatements()
        for _ in 1...2 {  // worked out, then remembered: the same answers
            for sql in ["SELECT 1", "  with x as (select 1) select * from x", "UPDATE t SET a = 1", "INSERT INTO t VALUES (1)"] {
                #expect(none.name(for: sql) == PreparedStatements.name(of: sql), "\(sql)")
            }
            for sql in ["BEGIN", "COMMIT", "LISTEN x", "VACUUM t", "EXPLAIN SELECT 1", "SET jit = off", "DEALLOCATE ALL", ""] {
                #expect(none.name(for: sql) == nil, "\(sql)")
            }
        }
    }

    /// The texts a session remembers are bounded like its statements: texts without end are
    /// still named right, and what is kept stays at `capacity`.
    @Test func theRememberedTextsAreBounded() {
        var session = PreparedStatements()
        for n in 0..<(3 * PreparedStatements.capacity) {
            #expect(session.name(for: "SELECT \(n)") == PreparedStatements.name(of: "SELECT \(n)"))
        }
        #expect(session.rememberedTexts == PreparedStatements.capacity)
        #expect(session.name(for: "SELECT 1") == PreparedStatements.name(of: "SELECT 1"))
    }

    @Test func aFullSessionSendsNewTextsUnnamed() {
        var session = PreparedStatements()
        for n in 0..<PreparedStatements.capacity { session.insert(PreparedStatements.name(of: "SELECT \(n)")) }
        #expect(session.name(for: "SELECT 0") == PreparedStatements.name(of: "SELECT 0"), "still prepared")
        #expect(session.name(for: "SELECT -1") == nil, "past the bound")
        session.removeAll()
        #expect(session.name(for: "SELECT -1") != nil)
    }
}
