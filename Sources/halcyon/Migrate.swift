import ArgumentParser
import HalcyonCLI
import HalcyonQueue

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply pending migrations (idempotent; safe to run from several processes at once).",
        discussion:
            "Reads migrations/NNNN_*.sql (or $HALCYON_MIGRATIONS) and applies the ones not yet recorded in halcyon.schema_migrations, in order, each in a transaction, under an advisory lock."
    )

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Directory of migration files (default: found beside the binary, or $HALCYON_MIGRATIONS).")
    var migrations: String?

    func run() async throws {
        let migrations = try Migrator.load(from: Migrator.locateDirectory(explicit: self.migrations))
        let (connection, _) = try await database.connect(requireSchema: false)
        let applied = try await Migrator.migrate(connection, migrations: migrations)
        print(applied.isEmpty ? "up to date (\(migrations.count) migrations)" : "applied: \(applied.joined(separator: ", "))")
    }
}
