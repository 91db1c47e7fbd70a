import Foundation
import HalcyonRuntime

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
    /// Where the migration files are: `explicit` (`--migrations`), `$HALCYON_MIGRATIONS`, or
    /// `migrations/` found by `ResourceLocator` beside the binary. A directory the option or
    /// the variable names must hold them: if it does not, that is the error, whatever is
    /// installed elsewhere.
    public static func locateDirectory(explicit: String? = nil) throws -> URL {
        let (found, tried) = try ResourceLocator.find(
            "migrations", marker: "0001_jobs.sql", explicit: explicit, option: "--migrations", environment: "HALCYON_MIGRATIONS",
            expected: "Halcyon's migrations (0001_jobs.sql and the other NNNN_*.sql files)")
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
            try c.transactionLocked {
                try c.runLocked(SQL.MigrationLock())
                try c.runLocked(SQL.CreateSchema())
                try c.runLocked(SQL.CreateMigrationsTable())
                let applied = Set(try c.rowsLocked(SQL.AppliedVersions()).map(\.version))
                var done: [String] = []
                for m in migrations where !applied.contains(m.version) {
                    do {
                        try c.executeScriptLocked(m.sql)
                    } catch {
                        throw DatabaseError(
                            message: "migration \(m.name) failed, so none of the pending ones was applied: \(error)", connectionLost: false)
                    }
                    try c.runLocked(SQL.RecordMigration(version: m.version, file: m.name))
                    done.append(m.name)
                }
                return done
            }
        }
    }

    /// Versions recorded as applied (empty when the schema does not exist yet).
    public static func appliedVersions(_ connection: PGConnection) async throws -> [Int] {
        guard try await connection.row(SQL.MigrationsTableExists())?.exists == true else { return [] }
        return try await connection.rows(SQL.AppliedVersions()).map(\.version)
    }
}
