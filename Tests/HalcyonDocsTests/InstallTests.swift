import Foundation
import HalcyonEmbedded
import HalcyonTestSupport
import Testing

/// `scripts/install` into a prefix of its own, then the installed binary used as a newcomer uses
/// it: by name from `PATH`, in an unrelated directory, with no other variable set.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (binary)"))
struct InstallTests {
    @Test func anInstalledBinaryWorksFromAnyDirectoryWithOnlyPath() async throws {
        let base = try TestEnvironment.temporaryDirectory("install")
        let prefix = base.appendingPathComponent("prefix")
        let installLog = base.appendingPathComponent("install.log")
        let install = try Subprocess.spawn(
            "/bin/bash",
            [repositoryRoot.appendingPathComponent("scripts/install").path, "--prefix", prefix.path, "--binary", TestEnvironment.binary],
            outputPath: installLog.path)
        let installed = await PageRun.exitStatus(of: install)
        let installOutput = (try? String(contentsOf: installLog, encoding: .utf8)) ?? ""
        try #require(installed == 0, "scripts/install failed:\n\(installOutput)")
        for file in [
            "bin/halcyon", "share/halcyon/migrations/0001_jobs.sql", "share/halcyon/policy/policy.xml", "share/man/man1/halcyon-work.1",
        ] {
            #expect(FileManager.default.fileExists(atPath: prefix.appendingPathComponent(file).path), "\(file) was not installed")
        }

        // An unrelated directory, the embedded cluster under its ./.halcyon, nothing but PATH.
        let elsewhere = base.appendingPathComponent("elsewhere")
        let images = elsewhere.appendingPathComponent("images")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: try #require(PageRun.samples), to: images)
        let script = """
            set -euo pipefail
            cd '\(elsewhere.path)'
            halcyon migrate
            id=$(halcyon enqueue "file://$PWD/images/landscape.jpg" --processors 'resize(320x320) |> format(webp)')
            halcyon work --drain --no-progress --file-root "$PWD/images"
            halcyon show "$id"
            halcyon status
            """
        let log = base.appendingPathComponent("run.log")
        let pid = try Subprocess.spawn(
            "/usr/bin/timeout", ["--kill-after=10", "300", "/bin/bash", "-c", script], outputPath: log.path,
            environment: ["PATH": "\(prefix.path)/bin:/usr/bin:/bin"])
        let status = await PageRun.exitStatus(of: pid)
        let stop = try Subprocess.spawn(
            "/bin/bash", ["-c", "cd '\(elsewhere.path)' && halcyon embedded stop"], outputPath: base.appendingPathComponent("stop.log").path,
            environment: ["PATH": "\(prefix.path)/bin:/usr/bin:/bin"])
        _ = await PageRun.exitStatus(of: stop)

        let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        #expect(status == 0, "\(output)")
        #expect(output.contains("applied: 0001_jobs.sql"), "migrations from the prefix:\n\(output)")
        #expect(output.contains("magick_policy=\(prefix.path)/share/halcyon/policy"), "the installed policy is in force:\n\(output)")
        #expect(output.contains(#/state +succeeded/#), "the job succeeded:\n\(output)")
        #expect(!output.contains("cannot find"), "\(output)")
    }
}
