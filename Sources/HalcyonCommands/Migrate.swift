import ArgumentParser
import HalcyonCLI
import HalcyonQueue

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply pending migrations (idempotent; safe to run from several processes at once).",
        discussion: """
            Reads the migration files NNNN_*.sql — from migrations/ found beside the binary, or \
            from the directory --migrations or $HALCYON_MIGRATIONS names, which must hold them — \
            and applies the ones not yet recorded in halcyon.schema_migrations, in order, all in \
            one transaction: every pending migration is applied, or none is. The transaction \
            first takes a transaction-scoped advisory lock, so concurrent runs wait for each other \
            and then find nothing left to do, also through a pooler in transaction mode.
            """
    )

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Directory of the migration files; it must hold them (default: $HALCYON_MIGRATIONS, else found beside the binary).")
    var migrations: String?

    func run() async throws {
        let migrations = try Migrator.load(from: Migrator.locateDirectory(explicit: self.migrations))
        let (connection, _) = try await database.connect(requireSchema: false)
        let applied = try await Migrator.migrate(connection, migrations: migrations)
        print(applied.isEmpty ? "up to date (\(migrations.count) migrations)" : "applied: \(applied.joined(separator: ", "))")
    }
}
