import ArgumentParser
import Foundation
import HalcyonEmbedded
import HalcyonQueue
import HalcyonRuntime

/// Where the database is: `--database-url`, `DATABASE_URL`, the `PG*` variables, or the
/// embedded default under `$HALCYON_HOME`. Its description masks the URL's passwords (no custom
/// mirror: ArgumentParser finds the options through the type's own).
package struct DatabaseOptions: ParsableArguments, CustomStringConvertible, CustomDebugStringConvertible {
    package init() {}

    package var description: String { "DatabaseOptions(\(databaseURL.map(Redaction.conninfo) ?? "from the environment"))" }
    package var debugDescription: String { description }

    @Option(
        name: .customLong("database-url"), help: "libpq connection string or URI (default: DATABASE_URL, PG* variables, or the embedded cluster).")
    package var databaseURL: String?

    package enum Target {
        case external(String)
        case embedded(EmbeddedCluster)
    }

    package var target: Target {
        if let databaseURL, !databaseURL.isEmpty { return .external(databaseURL) }
        let env = ProcessInfo.processInfo.environment
        if let url = env["DATABASE_URL"], !url.isEmpty { return .external(url) }
        let pgVariables = ["PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE"]
        if pgVariables.contains(where: { env[$0].map { !$0.isEmpty } ?? false }) { return .external("") }
        return .embedded(EmbeddedCluster())
    }

    /// The connection string, starting the embedded cluster when that is the target.
    package func conninfo() throws -> String {
        switch target {
        case .external(let c): return c
        case .embedded(let cluster):
            try cluster.ensureRunning()
            return cluster.conninfo
        }
    }

    /// Connects and makes sure the schema is current: the embedded cluster is migrated
    /// automatically; an external database with pending migrations is an error.
    package func connect(requireSchema: Bool = true) async throws -> (PGConnection, String) {
        let conninfo = try conninfo()
        let connection = try await PGConnection.connect(conninfo)
        guard requireSchema else { return (connection, conninfo) }
        let migrations = try Migrator.load(from: Migrator.locateDirectory())
        let applied = Set(try await Migrator.appliedVersions(connection))
        let pending = migrations.filter { !applied.contains($0.version) }
        if !pending.isEmpty {
            if case .embedded = target {
                try await Migrator.migrate(connection, migrations: migrations)
            } else {
                throw CommandFailure(
                    "the database schema is not up to date (pending: \(pending.map(\.name).joined(separator: ", "))); run `halcyon migrate` first")
            }
        }
        return (connection, conninfo)
    }
}
