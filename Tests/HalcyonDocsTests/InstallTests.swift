import Foundation
import HalcyonEmbedded
import HalcyonTestSupport
import Testing

/// `scripts/install` into a prefix of its own, then the installed binary used as a newcomer uses
/// it: by name from `PATH`, in an unrelated directory, with no other variable set.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (binary)"), .processes)
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

    /// `scripts/package-deb` makes a package dpkg installs (into a root of the test's own, not the
    /// machine's), whose dependencies are real Debian packages, and whose binary finds its files.
    @Test func theDebianPackageInstallsWithDpkgAndRuns() async throws {
        let base = try TestEnvironment.temporaryDirectory("deb")
        let log = base.appendingPathComponent("package.log")
        func run(_ script: String, environment: [String: String]? = nil) async throws -> (Int32, String) {
            try? FileManager.default.removeItem(at: log)
            let pid = try Subprocess.spawn("/bin/bash", ["-c", script], outputPath: log.path, environment: environment)
            let status = await PageRun.exitStatus(of: pid)
            return (status, (try? String(contentsOf: log, encoding: .utf8)) ?? "")
        }
        let (built, buildOutput) = try await run(
            "'\(repositoryRoot.path)/scripts/package-deb' --binary '\(TestEnvironment.binary)' --out '\(base.path)' --uncompressed")
        try #require(built == 0, "\(buildOutput)")
        let deb = try #require(
            try FileManager.default.contentsOfDirectory(atPath: base.path).first { $0.hasSuffix(".deb") }.map { base.appendingPathComponent($0).path }
        )

        // Its version is the binary's own (`halcyon --version`), with the commit after it.
        let (_, version) = try await run("dpkg-deb -f '\(deb)' Version")
        let (_, binaryVersion) = try await run("'\(TestEnvironment.binary)' --version")
        let said = binaryVersion.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!said.isEmpty && version.hasPrefix(said + "~git"), "the package's version \(version) is not the binary's \(said)")

        // Every dependency names a package this (Debian) machine has installed.
        let (_, depends) = try await run("dpkg-deb -f '\(deb)' Depends")
        let packages = depends.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        #expect(packages.count >= 5, "\(depends)")
        for package in packages {
            let (status, state) = try await run("dpkg-query -W -f='${Status}' '\(package)'")
            #expect(status == 0 && state.contains("install ok installed"), "\(package) is not an installed Debian package: \(state)")
        }

        // dpkg installs it into a root of its own (its own status database).
        let root = base.appendingPathComponent("root")
        let (installed, installOutput) = try await run(
            """
            mkdir -p '\(root.path)/var/lib/dpkg/info' '\(root.path)/var/lib/dpkg/updates' && touch '\(root.path)/var/lib/dpkg/status'
            dpkg --root='\(root.path)' --force-depends --log=/dev/null -i '\(deb)'
            dpkg --root='\(root.path)' -L halcyon
            """)
        #expect(installed == 0, "\(installOutput)")
        for file in [
            "/usr/bin/halcyon", "/usr/share/halcyon/migrations/0001_jobs.sql", "/usr/share/halcyon/policy/policy.xml",
            "/usr/share/man/man1/halcyon-work.1.gz",
        ] {
            #expect(installOutput.contains(file), "dpkg -L lists \(file)")
        }

        let db = try await TestDatabase.create(migrated: false)
        let elsewhere = try TestEnvironment.temporaryDirectory("deb-elsewhere")
        let (ran, output) = try await run(
            "cd '\(elsewhere.path)' && halcyon migrate && halcyon status",
            environment: ["PATH": "\(root.path)/usr/bin:/usr/bin:/bin", "DATABASE_URL": db.conninfo])
        #expect(ran == 0, "\(output)")
        #expect(output.contains("applied: 0001_jobs.sql") && output.contains("JOBS"), "\(output)")
    }
}
