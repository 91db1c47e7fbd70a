import Foundation
import HalcyonEmbedded
import HalcyonTestSupport
import Testing

/// docs/cli/ is the commands' own help; the suite fails when a page no longer matches the binary.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (binary)"), .processes)
struct CLIReferenceTests {
    @Test func theReferenceMatchesTheBinarysHelp() async throws {
        let log = try TestEnvironment.temporaryDirectory("cli-reference").appendingPathComponent("check.log")
        let pid = try Subprocess.spawn(
            "/usr/bin/python3", [repositoryRoot.appendingPathComponent("scripts/cli-reference").path, "--check", "--binary", TestEnvironment.binary],
            outputPath: log.path)
        let status = await PageRun.exitStatus(of: pid)
        #expect(status == 0, "\((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
    }
}
