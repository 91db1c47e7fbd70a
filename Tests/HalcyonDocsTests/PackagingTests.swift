import Foundation
import Testing

/// `docker/Dockerfile` is built and run by `scripts/test-container` (Podman, after this suite in
/// CI); this keeps its package lists in step with `scripts/setup`, which the suite exercises.
@Suite struct PackagingTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    @Test func theImageBuildsWithTheDevelopmentPackagesSetupInstalls() throws {
        let setup = try Self.text("scripts/setup")
        let dockerfile = try Self.text("docker/Dockerfile")
        // The `packages=( … )` list: what the worker builds with (the docs' own packages follow it).
        let list = try #require(setup.components(separatedBy: "packages=(").dropFirst().first?.components(separatedBy: "\n)").first)
        let dev = Set(list.split(whereSeparator: \.isWhitespace).map(String.init).filter { $0.hasSuffix("-dev") })
        #expect(
            dev == [
                "libpq-dev", "libcurl4-openssl-dev", "libmagickwand-dev", "libjpeg62-turbo-dev", "libpng-dev", "libheif-dev", "libwebp-dev",
                "libjxl-dev", "libssl-dev",
            ])
        for package in dev.union(["pkg-config"]) {
            #expect(dockerfile.contains(" \(package)"), "docker/Dockerfile's build stage lacks \(package)")
        }
        // The runtime stage has each library's runtime package, and ships migrations and policy.
        for package in [
            "libpq5", "libcurl4", "libmagickwand-6.q16-6", "libjpeg62-turbo", "libpng16-16", "libheif1", "libwebp7", "libjxl0.7", "libssl3",
        ] {
            #expect(dockerfile.contains(" \(package)"), "runtime stage lacks \(package)")
        }
        #expect(dockerfile.contains("COPY migrations ") && dockerfile.contains("COPY policy "))
        #expect(dockerfile.contains("USER halcyon"))
    }

    @Test func composeRunsMigrateBeforeWorkersAndSharesTheStore() throws {
        let compose = try Self.text("docker/compose.yaml")
        #expect(compose.contains("command: [\"migrate\"]"))
        #expect(compose.contains("condition: service_completed_successfully"))
        #expect(compose.contains("store:/var/lib/halcyon/store"))
    }
}
