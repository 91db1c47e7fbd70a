import Foundation
import HalcyonCore

/// One migration file, `NNNN_name.sql`.
public struct Migration: Sendable, Equatable {
    public var version: Int
    public var name: String
    public var sql: String
}

/// Applies `migrations/NNNN_*.sql` in order, the pending ones together in one transaction that
/// first takes a transaction-scoped advisory lock, so concurrent `halcyon migrate` runs (or
/// workers starting together) wait for each other and then find nothing left to do — also
/// behind a pooler in transaction mode, where a session lock would stay with one server
/// connection.
public enum Migrator {
    /// Where the migration files are: `explicit`, `$HALCYON_MIGRATIONS`, or `migrations/`
    /// found by `ResourceLocator` beside the binary.
    public static func locateDirectory(explicit: String? = nil) throws -> URL {
        let (found, tried) = ResourceLocator.find("migrations", marker: "0001_jobs.sql", explicit: explicit, environment: "HALCYON_MIGRATIONS")
        guard let found else {
            throw DatabaseError(
                message: "cannot find the migrations directory (looked in \(tried.map(\.path).joined(separator: ", "))); set HALCYON_MIGRATIONS",
                connectionLost: false)
        }
        return found
    }

    /// Reads and orders the migration files of `directory`.
    public static func load(from directory: URL) throws -> [Migration] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        var migrations: [Migration] = []
        for name in names where name.hasSuffix(".sql") {
            guard let version = Int(name.prefix(while: \.isNumber)), version > 0 else { continue }
            let sql = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
            migrations.append(Migration(version: version, name: name, sql: sql))
        }
        migrations.sort { $0.version < $1.version }
        for (a, b) in zip(migrations, migrations.dropFirst()) where a.version == b.version {
            throw DatabaseError(message: "two migrations share version \(a.version): \(a.name), \(b.name)", connectionLost: false)
        }
        return migrations
    }

    /// Applies what is pending and returns the names applied (empty when up to date). All of it
    /// in one transaction: the pending migrations apply together or not at all.
    @discardableResult
    public static func migrate(_ connection: PGConnection, migrations: [Migration]) async throws -> [String] {
        try await connection.withLocked { c in
            try transaction(c) {
                try c.executeLocked(SQL.migrationLock)
                try c.executeScriptLocked(SQL.migrationBootstrap)
                let applied = Set(try c.executeLocked(SQL.appliedVersions).rows.compactMap { $0[0].flatMap { Int($0) } })
                var done: [String] = []
                for m in migrations where !applied.contains(m.version) {
                    do {
                        try c.executeScriptLocked(m.sql)
                    } catch {
                        throw DatabaseError(
                            message: "migration \(m.name) failed, so none of the pending ones was applied: \(error)", connectionLost: false)
                    }
                    try c.executeLocked(SQL.recordMigration, [String(m.version), m.name])
                    done.append(m.name)
                }
                return done
            }
        }
    }

    /// Runs `body` in a transaction on `c` (inside `withLocked`): committed when it returns,
    /// rolled back when it throws.
    private static func transaction<T>(_ c: PGConnection, _ body: () throws -> T) throws -> T {
        try c.executeLocked("BEGIN")
        do {
            let value = try body()
            try c.executeLocked("COMMIT")
            return value
        } catch {
            _ = try? c.executeLocked("ROLLBACK")
            throw error
        }
    }

    /// Versions recorded as applied (empty when the schema does not exist yet).
    public static func appliedVersions(_ connection: PGConnection) async throws -> [Int] {
        let exists = try await connection.execute("SELECT to_regclass('halcyon.schema_migrations') IS NOT NULL AS e")
        guard exists.value(0, "e") == "t" else { return [] }
        return try await connection.execute(SQL.appliedVersions).rows.compactMap { $0[0].flatMap { Int($0) } }
    }
}
