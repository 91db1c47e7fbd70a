import Foundation
import HalcyonFuzz
import Testing

/// Every seed and every kept crash reproducer of every fuzz target
/// (`Tests/Fixtures/fuzz/TARGET/seeds/`, `…/crashes/`) through the target's entry, as libFuzzer
/// would run it: each must return. An input that crashes ends the test process — that is the
/// failure. No database, no network, no ImageMagick.
@Suite struct FuzzReplayTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/fuzz")

    @Test(arguments: FuzzTargets.all.map(\.name))
    func everySeedAndCrashReturns(_ name: String) throws {
        let target = try #require(FuzzTargets.named(name))
        let directory = Self.fixtures.appendingPathComponent(name)
        let seeds = FuzzEntry.inputs(directory.appendingPathComponent("seeds").path)
        #expect(!seeds.isEmpty, "no seeds for \(name)")
        for file in seeds + FuzzEntry.inputs(directory.appendingPathComponent("crashes").path) {
            let data = try #require(FileManager.default.contents(atPath: file))
            target.run(data)
        }
    }

    /// Each directory under `Tests/Fixtures/fuzz/` is a target's (a renamed target leaves none behind).
    @Test func everyFixtureDirectoryIsATarget() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.fixtures.path).filter {
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: Self.fixtures.appendingPathComponent($0).path, isDirectory: &isDirectory)
                && isDirectory.boolValue
        }
        #expect(Set(names) == Set(FuzzTargets.all.map(\.name)))
    }
}
