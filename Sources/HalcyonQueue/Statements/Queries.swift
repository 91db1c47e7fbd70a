/// HalcyonQueue's query files (`Sources/HalcyonQueue/Queries/*.sql`), embedded in the binary by
/// SwiftPM (`resources: [.embedInCode("Queries")]`): every statement the queue runs, by name. A
/// new file is listed here; `QueryFileTests` fails when a file of the directory is not.
public enum Queries {
    public static let queue = QueryLibrary(files: files)

    static let files: [(name: String, bytes: [UInt8])] = [
        ("admin.sql", PackageResources.admin_sql),
        ("callbacks.sql", PackageResources.callbacks_sql),
        ("claim.sql", PackageResources.claim_sql),
        ("duties.sql", PackageResources.duties_sql),
        ("leases.sql", PackageResources.leases_sql),
        ("migrations.sql", PackageResources.migrations_sql),
        ("overview.sql", PackageResources.overview_sql),
        ("presets.sql", PackageResources.presets_sql),
        ("queues.sql", PackageResources.queues_sql),
        ("record.sql", PackageResources.record_sql),
        ("retention.sql", PackageResources.retention_sql),
        ("session.sql", PackageResources.session_sql),
        ("similar.sql", PackageResources.similar_sql),
        ("status.sql", PackageResources.status_sql),
        ("usage.sql", PackageResources.usage_sql),
        ("workers.sql", PackageResources.workers_sql),
    ]
}
