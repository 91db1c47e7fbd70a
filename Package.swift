// swift-tools-version:6.0
import PackageDescription

// Halcyon: a batch image pipeline worker fed by a PostgreSQL job queue.
// One library module per concern (see ../shared/ARCHITECTURE.md); thin C shims under Sources/C*.
/// Include paths of ImageMagick 6 on Debian (both multiarch triplets, for the Docker image).
let magickIncludes: [SwiftSetting] = [.unsafeFlags([
    "-Xcc", "-I/usr/include/ImageMagick-6",
    "-Xcc", "-I/usr/include/x86_64-linux-gnu/ImageMagick-6",
    "-Xcc", "-I/usr/include/aarch64-linux-gnu/ImageMagick-6",
])]

let package = Package(
    name: "Halcyon",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "halcyon", targets: ["halcyon"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
    ],
    targets: [
        // C libraries, linked through pkg-config.
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // No pkgConfig here: SwiftPM would warn about (and drop) the -D/-fopenmp flags MagickWand's
        // .pc carries; the shim header defines what matters and `magickIncludes` adds the paths.
        .systemLibrary(name: "CMagickWand", providers: [.apt(["libmagickwand-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),

        // Shared vocabulary: errors with categories, durations, job options, blocking-call offload.
        .target(name: "HalcyonCore", dependencies: [
            .product(name: "Logging", package: "swift-log"),
        ]),
        // PostgreSQL: connection, migrations, the job queue (claim, lease, complete, rescue).
        .target(name: "HalcyonQueue", dependencies: ["HalcyonCore", "CLibPQ"]),
        // Sources and downloads.
        .target(name: "HalcyonFetch", dependencies: ["HalcyonCore", "CCurl"]),
        // Chain grammar, processors and MagickWand.
        .target(name: "HalcyonImage", dependencies: ["HalcyonCore", "CMagickWand"], swiftSettings: magickIncludes),
        // Content-addressed disk store.
        .target(name: "HalcyonStore", dependencies: ["HalcyonCore", "CCrypto"]),
        // The worker runtime: claim loop, slots, heartbeat, rescuer, graceful stop.
        .target(name: "HalcyonWorker", dependencies: [
            "HalcyonCore", "HalcyonQueue", "HalcyonFetch", "HalcyonImage", "HalcyonStore",
        ]),
        .executableTarget(name: "halcyon", dependencies: [
            "HalcyonCore", "HalcyonQueue", "HalcyonFetch", "HalcyonImage", "HalcyonStore", "HalcyonWorker",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),

        // Helpers for the integration tests: throwaway databases, the origin, worker processes.
        .target(name: "HalcyonTestSupport", dependencies: ["HalcyonCore", "HalcyonQueue", "HalcyonFetch"],
                path: "Tests/HalcyonTestSupport"),

        .testTarget(name: "HalcyonCoreTests", dependencies: ["HalcyonCore"]),
        .testTarget(name: "HalcyonImageTests", dependencies: ["HalcyonImage", "HalcyonCore", "HalcyonTestSupport"]),
        .testTarget(name: "HalcyonStoreTests", dependencies: ["HalcyonStore", "HalcyonCore"]),
        .testTarget(name: "HalcyonFetchTests", dependencies: ["HalcyonFetch", "HalcyonCore", "HalcyonTestSupport", "HalcyonImage", "HalcyonStore"]),
        .testTarget(name: "HalcyonQueueTests", dependencies: ["HalcyonQueue", "HalcyonCore", "HalcyonTestSupport"]),
        .testTarget(name: "HalcyonWorkerTests", dependencies: [
            "HalcyonWorker", "HalcyonQueue", "HalcyonCore", "HalcyonImage", "HalcyonStore", "HalcyonTestSupport",
        ]),
    ],
    swiftLanguageModes: [.v6]
)
