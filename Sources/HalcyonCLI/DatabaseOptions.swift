import ArgumentParser
import Foundation
import HalcyonEmbedded
import HalcyonQueue
import HalcyonRuntime
import Synchronization

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

    /// libpq's variables that choose an external database (`PGPASSWORD` and the others do not).
    package static let selectingVariables = ["PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE"]

    package var target: Target {
        if let databaseURL, !databaseURL.isEmpty { return .external(databaseURL) }
        let env = ProcessInfo.processInfo.environment
        if let url = env["DATABASE_URL"], !url.isEmpty { return .external(url) }
        if Self.selectingVariables.contains(where: { env[$0].map { !$0.isEmpty } ?? false }) { return .external("") }
        return .embedded(EmbeddedCluster())
    }

    /// The embedded clusters this process initialised (by their `pg/` path): a message about one
    /// says it was just created — the usual reason it holds nothing.
    private static let created = Mutex<Set<String>>([])

    /// Which database this command uses, for its messages, never with a password: "the database
    /// DATABASE_URL names (postgresql://halcyon:***@db.internal/app)", "the database the PG*
    /// variables name (PGHOST=… PGDATABASE=…)", or "the embedded cluster at PATH" (", just
    /// created" when this command initialised it).
    package var described: String {
        switch target {
        case .embedded(let cluster):
            let path = cluster.home.appendingPathComponent("pg").path
            return "the embedded cluster at \(path)" + (Self.created.withLock { $0.contains(path) } ? ", just created" : "")
        case .external(let conninfo):
            if conninfo.isEmpty {
                let env = ProcessInfo.processInfo.environment
                let set = Self.selectingVariables.compactMap { name in env[name].flatMap { $0.isEmpty ? nil : "\(name)=\($0)" } }
                return "the database the PG* variables name (\(set.joined(separator: " ")))"
            }
            let source = databaseURL.map { !$0.isEmpty } == true ? "--database-url" : "DATABASE_URL"
            return "the database \(source) names (\(Redaction.conninfo(conninfo)))"
        }
    }

    /// The connection string, starting the embedded cluster when that is the target.
    package func conninfo() throws -> String {
        switch target {
        case .external(let c): return c
        case .embedded(let cluster):
            if try cluster.ensureRunning() {
                _ = Self.created.withLock { $0.insert(cluster.home.appendingPathComponent("pg").path) }
            }
            return cluster.conninfo
        }
    }

    /// Connects and makes sure the schema is current: the embedded cluster is migrated
    /// automatically; an external database with pending migrations is an error. A connection
    /// that fails says which database it tried (`described`).
    package func connect(requireSchema: Bool = true, settings: StatementSettings = .halcyon) async throws -> (PGConnection, String) {
        let conninfo = try conninfo()
        let connection: PGConnection
        do {
            connection = try await PGConnection.connect(conninfo, settings: settings)
        } catch let error as DatabaseError {
            let reason = error.message.hasPrefix("cannot connect: ") ? String(error.message.dropFirst("cannot connect: ".count)) : error.message
            throw DatabaseError(message: "cannot connect to \(described): \(reason)", sqlState: error.sqlState, connectionLost: error.connectionLost)
        }
        guard requireSchema else { return (connection, conninfo) }
        let migrations = try Migrator.load(from: Migrator.locateDirectory())
        let applied = Set(try await Migrator.appliedVersions(connection))
        let pending = migrations.filter { !applied.contains($0.version) }
        if !pending.isEmpty {
            if case .embedded = target {
                try await Migrator.migrate(connection, migrations: migrations)
            } else {
                throw CommandFailure(
                    "the database schema is not up to date in \(described) (pending: \(pending.map(\.name).joined(separator: ", "))); run `halcyon migrate` first"
                )
            }
        }
        return (connection, conninfo)
    }
}
