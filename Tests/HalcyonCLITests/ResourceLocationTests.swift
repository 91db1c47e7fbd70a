import Foundation
import HalcyonTestSupport
import Testing

/// The binary finds what it ships with (`migrations/`, `policy/`) from its own path, not from
/// argv[0], which has no directory when it was found on `PATH`.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes)
struct ResourceLocationTests {
    @Test func aBinaryFoundOnPathFindsItsMigrationsFromAnyDirectory() async throws {
        let db = try await TestDatabase.create()
        let elsewhere = try TestEnvironment.temporaryDirectory("elsewhere")
        let bin = URL(fileURLWithPath: TestEnvironment.binary).deletingLastPathComponent().path
        // As a user runs it: by bare name, from a directory of their own, no HALCYON_MIGRATIONS.
        let status = try HalcyonProcess(
            ["-c", "cd \"$1\" && exec halcyon status --database-url \"$2\"", "sh", elsewhere.path, db.conninfo], conninfo: nil,
            environment: ["PATH": "\(bin):/usr/bin:/bin", "HALCYON_MIGRATIONS": "", "HALCYON_POLICY_DIR": ""], executable: "/bin/sh")
        #expect(await status.wait(timeout: 60) == 0, "\(status.output)")
        #expect(status.output.contains("JOBS"), "\(status.output)")
        #expect(!status.output.contains("cannot find the migrations directory"))
    }
}
