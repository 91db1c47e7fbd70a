// migrations.sql, session.sql.

extension SQL {
    struct MigrationLock: Query {
        static let name = "migrationLock"

        struct Row: QueryRow {
            static let columns = ["pg_advisory_xact_lock"]
            static let unread = Set(columns)
            init?(_ row: RowReader) { nil }
        }
    }

    struct CreateSchema: Query {
        static let name = "createSchema"
    }

    struct CreateMigrationsTable: Query {
        static let name = "createMigrationsTable"
    }

    struct MigrationsTableExists: Query {
        static let name = "migrationsTableExists"

        struct Row: QueryRow {
            static let columns = ["e"]
            var exists: Bool
            init?(_ row: RowReader) { exists = row.bool("e") ?? false }
        }
    }

    struct AppliedVersions: Query {
        static let name = "appliedVersions"

        struct Row: QueryRow {
            static let columns = ["version"]
            var version: Int
            init?(_ row: RowReader) {
                guard let v = row.int("version") else { return nil }
                version = v
            }
        }
    }

    struct RecordMigration: Query {
        static let name = "recordMigration"
        var version: Int
        var file: String

        func bind(_ p: inout QueryParameters) {
            p.add(version)
            p.add(file)
        }
    }

    struct Begin: Query {
        static let name = "begin"
    }

    struct Commit: Query {
        static let name = "commit"
    }

    struct Rollback: Query {
        static let name = "rollback"
    }

    struct ListenJobs: Query {
        static let name = "listenJobs"
    }

    struct ListenFinished: Query {
        static let name = "listenFinished"
    }
}
